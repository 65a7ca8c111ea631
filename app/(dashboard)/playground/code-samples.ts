// "Copy as code": the request a playground section is about to make, written as a curl command,
// JavaScript (Node 22: fetch, FormData, WebSocket are built in) and Python (requests; websockets
// for the socket), against the gateway's public URL. The key is always the SVC_API_KEY variable,
// never a real key: the page has none, and a pasted snippet must not carry one.

export const KEY_VARIABLE = 'SVC_API_KEY';

export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** A JSON POST: chat completions (streamed or not), /tts/bytes (audio saved to `saveAs`). */
export interface JsonRequest {
  kind: 'json';
  url: string;
  body: { [key: string]: Json };
  /** The answer is server-sent events: printed as they come. */
  stream?: boolean;
  /** The answer is a file: written there. */
  saveAs?: string;
}

/** A multipart POST with one file (/v1/audio/transcriptions). */
export interface FormRequest {
  kind: 'form';
  url: string;
  fields: Record<string, string>;
  /** The file's field name and the name of the local file to send. */
  file: { field: string; path: string };
}

/** One context on Cartesia's /tts/websocket: the generation request, its raw audio written to `saveAs`. */
export interface SocketRequest {
  kind: 'tts-socket';
  /** ws:// or wss:// URL of /tts/websocket. */
  url: string;
  message: { [key: string]: Json };
  /** The same speech over HTTP (POST /tts/sse), for curl, which speaks no WebSocket. */
  sseUrl: string;
  saveAs: string;
}

export type CodeRequest = JsonRequest | FormRequest | SocketRequest;
export type Language = 'curl' | 'javascript' | 'python';
export const LANGUAGES: { id: Language; label: string }[] = [
  { id: 'curl', label: 'curl' },
  { id: 'javascript', label: 'JavaScript' },
  { id: 'python', label: 'Python' },
];

export function codeFor(request: CodeRequest, language: Language): string {
  if (language === 'curl') return curl(request);
  if (language === 'javascript') return javascript(request);
  return python(request);
}

/** A POSIX shell single-quoted word: anything inside is literal, a ' is closed, escaped and reopened. */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

const pretty = (value: Json) => JSON.stringify(value, null, 2);

/** A JSON value as a Python literal (JSON's strings are valid Python strings; true/false/null are not). */
export function pythonLiteral(value: Json, indent = ''): string {
  if (value === null) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'number' || typeof value === 'string') return JSON.stringify(value);
  const inner = `${indent}    `;
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return `[\n${value.map((v) => `${inner}${pythonLiteral(v, inner)},`).join('\n')}\n${indent}]`;
  }
  const entries = Object.entries(value);
  if (entries.length === 0) return '{}';
  return `{\n${entries.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${pythonLiteral(v, inner)},`).join('\n')}\n${indent}}`;
}

/** Continues a JavaScript object literal's lines at `indent`. */
const indented = (text: string, indent: string) => text.replace(/\n/g, `\n${indent}`);

function curl(request: CodeRequest): string {
  const auth = `-H "Authorization: Bearer $${KEY_VARIABLE}"`;
  if (request.kind === 'json') {
    return [
      `curl -sS${request.stream ? ' -N' : ''} ${request.url}`,
      `  ${auth}`,
      `  -H 'Content-Type: application/json'`,
      `  -d ${shellQuote(pretty(request.body))}`,
      ...(request.saveAs ? [`  -o ${request.saveAs}`] : []),
    ].join(' \\\n');
  }
  if (request.kind === 'form') {
    return [
      `curl -sS ${request.url}`,
      `  ${auth}`,
      `  -F ${shellQuote(`${request.file.field}=@${request.file.path}`)}`,
      ...Object.entries(request.fields).map(([k, v]) => `  -F ${shellQuote(`${k}=${v}`)}`),
    ].join(' \\\n');
  }
  const { context_id: _context, ...body } = request.message;
  return [
    `# curl speaks no WebSocket: the same speech streamed over HTTP as server-sent events (POST /tts/sse),`,
    `# each "chunk" event's data base64 raw audio.`,
    [`curl -sS -N ${request.sseUrl}`, `  ${auth}`, `  -H 'Content-Type: application/json'`, `  -d ${shellQuote(pretty(body))}`].join(' \\\n'),
  ].join('\n');
}

function javascript(request: CodeRequest): string {
  const auth = `Authorization: \`Bearer \${process.env.${KEY_VARIABLE}}\``;
  if (request.kind === 'json') {
    const call = [
      `const res = await fetch(${JSON.stringify(request.url)}, {`,
      `  method: 'POST',`,
      `  headers: { ${auth}, 'Content-Type': 'application/json' },`,
      `  body: JSON.stringify(${indented(pretty(request.body), '  ')}),`,
      `});`,
      `if (!res.ok) throw new Error(await res.text());`,
    ];
    if (request.saveAs)
      return [
        `import { writeFileSync } from 'node:fs';`,
        '',
        ...call,
        `writeFileSync(${JSON.stringify(request.saveAs)}, Buffer.from(await res.arrayBuffer()));`,
      ].join('\n');
    if (request.stream) {
      return [
        ...call,
        `// Server-sent events: each "data:" line is a chunk, the last "data: [DONE]".`,
        `for await (const text of res.body.pipeThrough(new TextDecoderStream())) process.stdout.write(text);`,
      ].join('\n');
    }
    return [...call, `console.log(await res.json());`].join('\n');
  }
  if (request.kind === 'form') {
    return [
      `import { openAsBlob } from 'node:fs';`,
      '',
      `const form = new FormData();`,
      `form.set(${JSON.stringify(request.file.field)}, await openAsBlob(${JSON.stringify(request.file.path)}), ${JSON.stringify(request.file.path)});`,
      ...Object.entries(request.fields).map(([k, v]) => `form.set(${JSON.stringify(k)}, ${JSON.stringify(v)});`),
      `const res = await fetch(${JSON.stringify(request.url)}, {`,
      `  method: 'POST',`,
      `  headers: { ${auth} },`,
      `  body: form,`,
      `});`,
      `if (!res.ok) throw new Error(await res.text());`,
      `console.log(await res.json());`,
    ].join('\n');
  }
  return [
    `import { writeFileSync } from 'node:fs';`,
    '',
    `// A server may send the key in the query; a browser gets an access token instead (POST /access-token).`,
    `const ws = new WebSocket(\`${request.url}?api_key=\${process.env.${KEY_VARIABLE}}&cartesia_version=2025-04-16\`);`,
    `const audio = [];`,
    `ws.onopen = () => ws.send(JSON.stringify(${indented(pretty(request.message), '')}));`,
    `ws.onmessage = ({ data }) => {`,
    `  const event = JSON.parse(data);`,
    `  if (event.type === 'chunk') audio.push(Buffer.from(event.data, 'base64'));`,
    `  if (event.type === 'error') console.error(event.message);`,
    `  if (event.done) {`,
    `    writeFileSync(${JSON.stringify(request.saveAs)}, Buffer.concat(audio));`,
    `    ws.close();`,
    `  }`,
    `};`,
  ].join('\n');
}

function python(request: CodeRequest): string {
  const auth = `{"Authorization": f"Bearer {os.environ['${KEY_VARIABLE}']}"}`;
  if (request.kind === 'json') {
    const call = [
      `import os`,
      '',
      `import requests`,
      '',
      `res = requests.post(`,
      `    ${JSON.stringify(request.url)},`,
      `    headers=${auth},`,
      `    json=${pythonLiteral(request.body, '    ')},`,
      ...(request.stream ? [`    stream=True,`] : []),
      `)`,
      `res.raise_for_status()`,
    ];
    if (request.saveAs) return [...call, `with open(${JSON.stringify(request.saveAs)}, "wb") as f:`, `    f.write(res.content)`].join('\n');
    if (request.stream)
      return [
        ...call,
        `# Server-sent events: each "data:" line is a chunk, the last "data: [DONE]".`,
        `for line in res.iter_lines(decode_unicode=True):`,
        `    print(line)`,
      ].join('\n');
    return [...call, `print(res.json())`].join('\n');
  }
  if (request.kind === 'form') {
    return [
      `import os`,
      '',
      `import requests`,
      '',
      `with open(${JSON.stringify(request.file.path)}, "rb") as f:`,
      `    res = requests.post(`,
      `        ${JSON.stringify(request.url)},`,
      `        headers=${auth},`,
      `        files={${JSON.stringify(request.file.field)}: f},`,
      `        data=${pythonLiteral(request.fields, '        ')},`,
      `    )`,
      `res.raise_for_status()`,
      `print(res.json())`,
    ].join('\n');
  }
  return [
    `import asyncio`,
    `import base64`,
    `import json`,
    `import os`,
    '',
    `import websockets`,
    '',
    '',
    `async def main():`,
    `    url = f"${request.url}?api_key={os.environ['${KEY_VARIABLE}']}&cartesia_version=2025-04-16"`,
    `    async with websockets.connect(url) as ws:`,
    `        await ws.send(json.dumps(${pythonLiteral(request.message, '        ')}))`,
    `        with open(${JSON.stringify(request.saveAs)}, "wb") as out:`,
    `            async for message in ws:`,
    `                event = json.loads(message)`,
    `                if event["type"] == "chunk":`,
    `                    out.write(base64.b64decode(event["data"]))`,
    `                elif event["type"] == "error":`,
    `                    print(event["message"])`,
    `                if event.get("done"):`,
    `                    break`,
    '',
    '',
    `asyncio.run(main())`,
  ].join('\n');
}
