/**
 * The client's JSON object text with the given top-level members' values replaced (appended
 * when absent; values are JSON texts), every other byte unchanged: a re-serialisation would
 * round a 20-digit seed and respell numbers. `raw` has already been parsed as a JSON object,
 * so the scan below can trust its syntax.
 */
export function patchTopLevelMembers(raw: Buffer, patch: Record<string, string>): Buffer {
  const text = raw.toString('utf8');
  const spans = new Map<string, [number, number]>();
  let i = skipWs(text, 0) + 1; // past '{'
  for (;;) {
    i = skipWs(text, i);
    if (text[i] === ',') i = skipWs(text, i + 1);
    if (i >= text.length || text[i] === '}') break;
    const keyEnd = stringEnd(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    const start = skipWs(text, skipWs(text, keyEnd) + 1); // past ':'
    i = valueEnd(text, start);
    spans.set(key, [start, i]); // a repeated key: the last one counts, as in JSON.parse
  }
  const edits: { start: number; end: number; text: string }[] = [];
  const added: string[] = [];
  for (const [key, value] of Object.entries(patch)) {
    const span = spans.get(key);
    if (span) edits.push({ start: span[0], end: span[1], text: value });
    else added.push(`${JSON.stringify(key)}:${value}`);
  }
  if (added.length > 0) edits.push({ start: i, end: i, text: (spans.size > 0 ? ',' : '') + added.join(',') });
  let out = text;
  for (const e of edits.sort((a, b) => b.start - a.start)) out = out.slice(0, e.start) + e.text + out.slice(e.end);
  return Buffer.from(out, 'utf8');
}

const isJsonWs = (c: string | undefined) => c === ' ' || c === '\n' || c === '\r' || c === '\t';

function skipWs(text: string, i: number): number {
  while (isJsonWs(text[i])) i++;
  return i;
}

/** End (exclusive) of the string literal that starts at i. */
function stringEnd(text: string, i: number): number {
  for (let j = i + 1; j < text.length; j++) {
    if (text[j] === '\\') j++;
    else if (text[j] === '"') return j + 1;
  }
  return text.length;
}

/** End (exclusive) of the JSON value that starts at i. */
function valueEnd(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return stringEnd(text, i);
  if (c === '{' || c === '[') {
    let depth = 0;
    for (let j = i; j < text.length;) {
      const d = text[j];
      if (d === '"') {
        j = stringEnd(text, j);
        continue;
      }
      if (d === '{' || d === '[') depth++;
      else if ((d === '}' || d === ']') && --depth === 0) return j + 1;
      j++;
    }
    return text.length;
  }
  let j = i;
  while (j < text.length && !isJsonWs(text[j]) && text[j] !== ',' && text[j] !== '}' && text[j] !== ']') j++;
  return j;
}
