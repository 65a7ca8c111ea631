import { describe, expect, it } from 'vitest';
import { byFunction, type CpuProfile } from './cpu-profile.ts';

const frame = (functionName: string, lineNumber = 0) => ({ functionName, url: functionName.startsWith('(') ? '' : 'file:///app.mjs', lineNumber });

describe('selfTimes', () => {
  it("charges the gap after a sample to that sample's function, not to the next one", () => {
    // commit (a long native call: one sample, then none for 5 ms), then settle right after it.
    const profile: CpuProfile = {
      nodes: [
        { id: 1, callFrame: frame('(root)') },
        { id: 2, callFrame: frame('commit', 10) },
        { id: 3, callFrame: frame('settle', 20) },
      ],
      startTime: 1_000,
      samples: [2, 3],
      timeDeltas: [100, 5_000],
      endTime: 6_300,
    };
    const self = byFunction(profile);
    expect(self.get('commit file:///app.mjs:11')).toBe(5_000);
    // The last sample runs to the profile's end.
    expect(self.get('settle file:///app.mjs:21')).toBe(200);
  });
});
