// Audio pipeline benchmark: 60 s of 22050 Hz speech-like audio (s16, as the TTS engines hand
// it over) converted to each output format, one-shot (convertAll) and streamed in 20 ms
// chunks (createAudioConverter), on one thread. Reports multiples of real time (audio seconds
// / processing seconds; median of --runs after one warm-up) against the targets: >= 100x for
// PCM outputs, >= 40x for MP3. "Per core" is measured on the process's CPU time, so that other
// load on the machine does not count against it; wall-clock figures are printed beside it.
//   npx tsx bench/audio-pipeline.ts [--runs 5] [--seconds 60]
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { convertAll, createAudioConverter, type OutputFormat } from '../gateway/audio/convert.ts';
import type { Encoding, SampleRate } from '../gateway/audio/output-format.ts';
import { floatToS16 } from '../gateway/audio/pcm.ts';
import { resample } from '../gateway/audio/resample.ts';
import { speechLike } from '../gateway/audio/test-signals.ts';
import { median, table } from './lib/load.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' }, seconds: { type: 'string', default: '60' } } });
const runs = Number(values.runs);
const seconds = Number(values.seconds);
const INPUT_RATE = 22050;
const CHUNK = Math.round(INPUT_RATE * 0.02);

const input = floatToS16(speechLike(INPUT_RATE, seconds));

interface Speed {
  cpu: number;
  wall: number;
}

/** x real time by CPU time and by wall time, medians over `runs` after one warm-up. */
function timeIt(fn: () => unknown): Speed {
  fn();
  const cpu: number[] = [];
  const wall: number[] = [];
  for (let r = 0; r < runs; r++) {
    const c = process.cpuUsage();
    const t = performance.now();
    fn();
    wall.push((performance.now() - t) / 1000);
    const used = process.cpuUsage(c);
    cpu.push((used.user + used.system) / 1e6);
  }
  return { cpu: seconds / median(cpu), wall: seconds / median(wall) };
}

function streamAll(output: OutputFormat): number {
  const conv = createAudioConverter({ inputSampleRate: INPUT_RATE, output });
  let bytes = conv.header().length;
  for (let at = 0; at < input.length; at += CHUNK) bytes += conv.push(input.subarray(at, at + CHUNK)).length;
  return bytes + conv.end().length;
}

const targets: OutputFormat[] = [
  ...(['pcm_s16le', 'pcm_f32le', 'pcm_mulaw', 'pcm_alaw'] as Encoding[]).flatMap((encoding) =>
    ([8000, 16000, 24000, 48000] as SampleRate[]).map((sampleRate): OutputFormat => ({ container: 'wav', encoding, sampleRate })),
  ),
  { container: 'mp3', sampleRate: 24000, bitRate: 128000 },
  { container: 'mp3', sampleRate: 44100, bitRate: 128000 },
];

const rows: Record<string, string | number>[] = [];
for (const output of targets) {
  const oneShot = timeIt(() => convertAll(input, INPUT_RATE, output));
  const streamed = timeIt(() => streamAll(output));
  const target = output.container === 'mp3' ? 40 : 100;
  rows.push({
    output: output.container === 'mp3' ? `mp3 ${output.bitRate! / 1000} kb/s` : `wav ${output.encoding}`,
    'rate Hz': output.sampleRate,
    'one-shot x RT/core': Math.round(oneShot.cpu),
    'streamed 20 ms x RT/core': Math.round(streamed.cpu),
    '(wall: one-shot / streamed)': `${Math.round(oneShot.wall)} / ${Math.round(streamed.wall)}`,
    target: `>= ${target}`,
    met: Math.min(oneShot.cpu, streamed.cpu) >= target ? 'yes' : 'NO',
  });
}

// The resampler alone, for where the time goes.
const floatInput = speechLike(INPUT_RATE, seconds);
const resampleRows = ([8000, 16000, 24000, 44100, 48000] as SampleRate[]).map((rate) => {
  const speed = timeIt(() => resample(floatInput, INPUT_RATE, rate));
  return { 'resample only, 22050 -> Hz': rate, 'x RT/core': Math.round(speed.cpu), 'wall x RT': Math.round(speed.wall) };
});

const [load1] = loadavg();
console.log(
  `\nAudio pipeline: ${seconds} s of 22050 Hz speech-like s16 audio, one thread, median of ${runs} runs (node ${process.version}, load average ${load1!.toFixed(1)})\n`,
);
console.log(table(rows));
console.log('\n' + table(resampleRows));
