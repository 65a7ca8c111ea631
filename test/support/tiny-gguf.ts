// A tiny, real GGUF model for tests of the local llama.cpp engine. No model download exists in this
// environment, so this writes one: GGUF v3, "llama" architecture, one layer, every attention and FFN
// weight zero. With those zeros the residual stream is just the (one-hot) embedding of the current
// token, so `output.weight` works as a bigram table: "after token X, emit token Y" with a logit so
// large that any temperature / top-k / top-p / repeat penalty still picks Y. The table sends every
// token outside the reply to the reply's first token, chains the reply's tokens and ends it with EOS,
// so whatever the prompt, the chat template's assistant prefix is followed by exactly the reply.
//
// Tokenizer: byte-level BPE ("gpt2" model, "llama-bpe" pre-tokenizer), 256 byte tokens (any text can
// be tokenized), ChatML control tokens, plus one token per pre-tokenizer piece of the reply. The
// llama3 pre-tokenizer makes llama.cpp take a whole piece straight from the vocabulary when it is
// there ("ignore merges"), so the reply tokenizes as exactly those pieces and no merges are needed.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

export const TINY_GGUF_DEFAULT_REPLY = 'Hello from the tiny model.';

export interface TinyGgufOptions {
  /** The sentence the model answers to any prompt. Its pre-tokenizer pieces must all differ. */
  reply?: string;
  /** `llama.context_length`, default 4096: what node-llama-cpp sizes "auto" contexts by. Text costs ~1 token per byte. */
  contextLength?: number;
}

export interface TinyGguf {
  path: string;
  reply: string;
  /** Tokens in the reply, both as generated and as `model.tokenize(reply)` counts them. */
  replyTokens: number;
  /** The reply's text token by token (so the text after n tokens is `replyPieces.slice(0, n).join('')`). */
  replyPieces: string[];
}

// ---- tokenizer ------------------------------------------------------------------------------------

const SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] as const;
const BOS_ID = 0; // <|endoftext|>
const EOS_ID = 2; // <|im_end|>: ChatML's end of turn; llama.cpp also treats it as end of generation.
const BYTE_BASE = SPECIAL_TOKENS.length;

const TOKEN_TYPE_NORMAL = 1;
const TOKEN_TYPE_CONTROL = 3;

const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** GPT-2's reversible byte -> printable character map, as byte-level BPE vocabularies store text. */
function byteToUnicode(): string[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const map: string[] = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    map[b] = String.fromCodePoint(printable.includes(b) ? b : 256 + extra++);
  }
  return map;
}

/** llama.cpp's LLAMA3 pre-tokenizer regex (the `(?i:...)` contraction group spelled out for JS). */
const LLAMA3_PRETOKENIZER =
  /'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

// ---- GGUF v3 writer -------------------------------------------------------------------------------

const ValueType = { UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8, ARRAY: 9 } as const;
const GGML_TYPE_F32 = 0;
const ALIGNMENT = 32;

type MetaValue =
  | { type: 'u32'; value: number }
  | { type: 'f32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'str'; value: string }
  | { type: 'str[]'; value: readonly string[] }
  | { type: 'i32[]'; value: readonly number[] };

interface Tensor {
  name: string;
  /** ggml order: ne[0] is the contiguous dimension. */
  dims: number[];
  data: Float32Array;
}

class ByteWriter {
  private chunks: Buffer[] = [];
  length = 0;
  private push(b: Buffer) {
    this.chunks.push(b);
    this.length += b.length;
  }
  u32(v: number) {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.push(b);
  }
  i32(v: number) {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.push(b);
  }
  u64(v: number) {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  f32(v: number) {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.push(b);
  }
  u8(v: number) {
    this.push(Buffer.from([v]));
  }
  str(s: string) {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.push(b);
  }
  raw(b: Buffer) {
    this.push(b);
  }
  pad(alignment: number) {
    const n = (alignment - (this.length % alignment)) % alignment;
    if (n) this.push(Buffer.alloc(n));
  }
  toBuffer() {
    return Buffer.concat(this.chunks, this.length);
  }
}

function writeValue(w: ByteWriter, v: MetaValue) {
  switch (v.type) {
    case 'u32':
      w.u32(ValueType.UINT32);
      w.u32(v.value);
      return;
    case 'f32':
      w.u32(ValueType.FLOAT32);
      w.f32(v.value);
      return;
    case 'bool':
      w.u32(ValueType.BOOL);
      w.u8(v.value ? 1 : 0);
      return;
    case 'str':
      w.u32(ValueType.STRING);
      w.str(v.value);
      return;
    case 'str[]':
      w.u32(ValueType.ARRAY);
      w.u32(ValueType.STRING);
      w.u64(v.value.length);
      for (const s of v.value) w.str(s);
      return;
    case 'i32[]':
      w.u32(ValueType.ARRAY);
      w.u32(ValueType.INT32);
      w.u64(v.value.length);
      for (const n of v.value) w.i32(n);
      return;
  }
}

function encodeGguf(metadata: [string, MetaValue][], tensors: Tensor[]): Buffer {
  const w = new ByteWriter();
  w.raw(Buffer.from('GGUF', 'ascii'));
  w.u32(3);
  w.u64(tensors.length);
  w.u64(metadata.length);
  for (const [key, value] of metadata) {
    w.str(key);
    writeValue(w, value);
  }
  let offset = 0;
  for (const t of tensors) {
    w.str(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(GGML_TYPE_F32);
    w.u64(offset);
    offset += Math.ceil(t.data.byteLength / ALIGNMENT) * ALIGNMENT;
  }
  w.pad(ALIGNMENT);
  for (const t of tensors) {
    w.raw(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    w.pad(ALIGNMENT);
  }
  return w.toBuffer();
}

// ---- the model ------------------------------------------------------------------------------------

/** Writes the tiny model to `path` (creating its directory) and says what it will answer. */
export async function writeTinyGguf(path: string, options: TinyGgufOptions = {}): Promise<TinyGguf> {
  const reply = options.reply ?? TINY_GGUF_DEFAULT_REPLY;
  const replyPieces = reply.match(LLAMA3_PRETOKENIZER) ?? [];
  if (replyPieces.join('') !== reply || replyPieces.length === 0) throw new Error(`tiny-gguf: cannot split reply ${JSON.stringify(reply)}`);
  if (new Set(replyPieces).size !== replyPieces.length) {
    // A bigram model has one successor per token, so a repeated token would loop or branch.
    throw new Error(`tiny-gguf: reply pieces must not repeat: ${JSON.stringify(replyPieces)}`);
  }

  const b2u = byteToUnicode();
  const encode = (text: string) => Array.from(Buffer.from(text, 'utf8'), (b) => b2u[b]!).join('');
  const tokens: string[] = [...SPECIAL_TOKENS, ...b2u];
  const tokenTypes: number[] = [...SPECIAL_TOKENS.map(() => TOKEN_TYPE_CONTROL), ...b2u.map(() => TOKEN_TYPE_NORMAL)];
  const replyIds = replyPieces.map((piece) => {
    const bytes = Buffer.from(piece, 'utf8');
    if (bytes.length === 1) return BYTE_BASE + bytes[0]!;
    tokens.push(encode(piece));
    tokenTypes.push(TOKEN_TYPE_NORMAL);
    return tokens.length - 1;
  });
  const nVocab = tokens.length;

  // One-hot embeddings need n_embd >= n_vocab.
  const headDim = 64;
  const nEmbd = Math.ceil(nVocab / headDim) * headDim;
  const nHead = nEmbd / headDim;
  const nHeadKv = 1;
  const nFf = 64;

  const next = new Array<number>(nVocab).fill(replyIds[0]!);
  replyIds.forEach((id, i) => (next[id] = replyIds[i + 1] ?? EOS_ID));

  const embd = new Float32Array(nEmbd * nVocab);
  for (let t = 0; t < nVocab; t++) embd[t * nEmbd + t] = 1;
  // The final RMS norm scales a one-hot vector by sqrt(n_embd), so this gives logits of ~1000 for
  // the chosen token and 0 for every other: softmax leaves the others exactly zero in float32.
  const peak = 1000 / Math.sqrt(nEmbd);
  const output = new Float32Array(nEmbd * nVocab);
  for (let t = 0; t < nVocab; t++) output[next[t]! * nEmbd + t] = peak;
  const ones = (n: number) => new Float32Array(n).fill(1);
  const zeros = (n: number) => new Float32Array(n);

  const tensors: Tensor[] = [
    { name: 'token_embd.weight', dims: [nEmbd, nVocab], data: embd },
    { name: 'output_norm.weight', dims: [nEmbd], data: ones(nEmbd) },
    { name: 'output.weight', dims: [nEmbd, nVocab], data: output },
    { name: 'blk.0.attn_norm.weight', dims: [nEmbd], data: ones(nEmbd) },
    { name: 'blk.0.attn_q.weight', dims: [nEmbd, nEmbd], data: zeros(nEmbd * nEmbd) },
    { name: 'blk.0.attn_k.weight', dims: [nEmbd, headDim * nHeadKv], data: zeros(nEmbd * headDim * nHeadKv) },
    { name: 'blk.0.attn_v.weight', dims: [nEmbd, headDim * nHeadKv], data: zeros(nEmbd * headDim * nHeadKv) },
    { name: 'blk.0.attn_output.weight', dims: [nEmbd, nEmbd], data: zeros(nEmbd * nEmbd) },
    { name: 'blk.0.ffn_norm.weight', dims: [nEmbd], data: ones(nEmbd) },
    { name: 'blk.0.ffn_gate.weight', dims: [nEmbd, nFf], data: zeros(nEmbd * nFf) },
    { name: 'blk.0.ffn_up.weight', dims: [nEmbd, nFf], data: zeros(nEmbd * nFf) },
    { name: 'blk.0.ffn_down.weight', dims: [nFf, nEmbd], data: zeros(nFf * nEmbd) },
  ];

  const metadata: [string, MetaValue][] = [
    ['general.architecture', { type: 'str', value: 'llama' }],
    // Keep model names free of "llama 3", "mistral", "gemma"...: node-llama-cpp picks chat wrappers by name.
    ['general.name', { type: 'str', value: 'Tiny Echo' }],
    ['general.file_type', { type: 'u32', value: 0 }], // all F32
    ['general.alignment', { type: 'u32', value: ALIGNMENT }],
    ['llama.context_length', { type: 'u32', value: options.contextLength ?? 4096 }],
    ['llama.embedding_length', { type: 'u32', value: nEmbd }],
    ['llama.block_count', { type: 'u32', value: 1 }],
    ['llama.feed_forward_length', { type: 'u32', value: nFf }],
    ['llama.attention.head_count', { type: 'u32', value: nHead }],
    ['llama.attention.head_count_kv', { type: 'u32', value: nHeadKv }],
    ['llama.attention.layer_norm_rms_epsilon', { type: 'f32', value: 1e-6 }],
    ['llama.rope.dimension_count', { type: 'u32', value: headDim }],
    ['llama.rope.freq_base', { type: 'f32', value: 10000 }],
    ['llama.vocab_size', { type: 'u32', value: nVocab }],
    ['tokenizer.ggml.model', { type: 'str', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'str', value: 'llama-bpe' }],
    ['tokenizer.ggml.tokens', { type: 'str[]', value: tokens }],
    ['tokenizer.ggml.token_type', { type: 'i32[]', value: tokenTypes }],
    ['tokenizer.ggml.merges', { type: 'str[]', value: [] }],
    ['tokenizer.ggml.bos_token_id', { type: 'u32', value: BOS_ID }],
    ['tokenizer.ggml.eos_token_id', { type: 'u32', value: EOS_ID }],
    ['tokenizer.ggml.padding_token_id', { type: 'u32', value: BOS_ID }],
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: false }],
    ['tokenizer.chat_template', { type: 'str', value: CHATML_TEMPLATE }],
  ];

  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, encodeGguf(metadata, tensors));
  return { path, reply, replyTokens: replyIds.length, replyPieces };
}
