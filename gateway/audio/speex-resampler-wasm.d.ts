// Types for the parts of @echogarden/speex-resampler-wasm (an Emscripten build of SpeexDSP's
// resampler, shipped without typings) that resample.ts calls. Signatures follow
// speex_resampler.h; pointers are byte offsets into the module's heap.
declare module '@echogarden/speex-resampler-wasm/simd' {
  export interface SpeexResamplerModule {
    HEAPF32: Float32Array;
    HEAPU32: Uint32Array;
    HEAP32: Int32Array;
    _malloc(bytes: number): number;
    _free(ptr: number): void;
    _speex_resampler_init(channels: number, inRate: number, outRate: number, quality: number, errPtr: number): number;
    _speex_resampler_destroy(state: number): void;
    _speex_resampler_skip_zeros(state: number): number;
    _speex_resampler_get_input_latency(state: number): number;
    _speex_resampler_process_float(state: number, channel: number, inPtr: number, inLenPtr: number, outPtr: number, outLenPtr: number): number;
  }
  const createModule: () => Promise<SpeexResamplerModule>;
  export default createModule;
}
