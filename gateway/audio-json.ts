// JSON text carrying audio as base64 (a Cartesia `chunk`, a realtime `response.output_audio.delta`):
// the base64 is most of the message and has nothing to escape, so it is written in as it is;
// JSON.stringify would scan it character by character, several times the cost of encoding it.

/** `message` as JSON text, with `audio` in base64 as its last field, `field`. */
export function jsonWithBase64(message: object, field: string, audio: Uint8Array): string {
  const rest = JSON.stringify(message);
  const base64 = Buffer.from(audio.buffer, audio.byteOffset, audio.byteLength).toString('base64');
  return `${rest.slice(0, -1)}${rest.length > 2 ? ',' : ''}${JSON.stringify(field)}:"${base64}"}`;
}
