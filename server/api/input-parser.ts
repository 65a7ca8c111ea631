// A tRPC input parser from a zod schema through parseInput: failures become the same
// invalid_request (BAD_REQUEST) with a `param` and one readable sentence as on the gateway,
// and the procedure's input type is the schema's input (fields with defaults stay optional).
// tRPC reads the types from `_input`/`_output` (its zod-like parser shape) and calls `parse`.
import type { z } from 'zod';
import { parseInput } from '../services/parse-input.ts';

export function inputOf<S extends z.ZodType>(schema: S): { _input: z.input<S>; _output: z.output<S>; parse: (raw: unknown) => z.output<S> } {
  return {
    _input: undefined as unknown as z.input<S>,
    _output: undefined as unknown as z.output<S>,
    // A missing input (a query called without arguments) is an empty object, so defaults apply.
    parse: (raw) => parseInput(schema, raw ?? {}),
  };
}
