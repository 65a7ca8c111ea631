/** What the bundled local-* models are, so their robotic speech and rough transcripts surprise no one, and how to add real engines. */
export function LocalEnginesNote() {
  return (
    <details className="rounded-md border border-indigo-200 bg-indigo-50 px-4 py-3 text-sm text-indigo-900" data-testid="local-engines-note">
      <summary className="cursor-pointer font-semibold">The local-… models are small offline engines</summary>
      <div className="mt-2 space-y-2">
        <p>
          The models named <code className="font-mono">local-…</code> run inside the gateway, with no network and no GPU: <strong>local-flite</strong> (Flite)
          and <strong>local-espeak</strong> (eSpeak NG) speak clearly but sound robotic; <strong>local-stt</strong> is PocketSphinx, a small recognizer whose
          transcripts are rough, even of the shipped voices; <strong>local-llm</strong> is llama.cpp and needs a GGUF model file before it answers. They are
          there to try the API, not to judge quality.
        </p>
        <p>
          To add real engines — a vLLM, Ollama or OpenAI LLM; Kokoro, Cartesia, Deepgram or ElevenLabs speech; Whisper or Deepgram transcription — an operator
          registers each with <code className="font-mono">svc model upsert</code>, as the engines page of the documentation shows (
          <code className="font-mono">docs/engines-and-protocols.md</code>). They then appear in the pickers here.
        </p>
      </div>
    </details>
  );
}
