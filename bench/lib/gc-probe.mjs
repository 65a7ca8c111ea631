// Preloaded into a benchmarked process (NODE_OPTIONS=--import <this file>, with GC_PROBE_FILE
// set): counts its garbage collections and how much the old generation grows between them,
// and writes the totals to GC_PROBE_FILE twice a second, for bench/gc-under-load.ts.
// Old-generation growth between two full GCs is what young-generation GCs promoted (plus
// anything allocated there directly): what makes scavenges slow and full GCs frequent.
import { writeFileSync } from 'node:fs';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';

const file = process.env.GC_PROBE_FILE;
if (file) {
  const oldBytes = () =>
    getHeapSpaceStatistics().reduce((sum, s) => (s.space_name === 'old_space' || s.space_name === 'large_object_space' ? sum + s.space_used_size : sum), 0);
  const totals = { minor: 0, minorMs: 0, minorMaxMs: 0, major: 0, majorMs: 0, majorMaxMs: 0, oldGrowthBytes: 0 };
  let lastOld = oldBytes();
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = /** @type {{ kind: number }} */ (entry.detail).kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) {
        totals.minor++;
        totals.minorMs += entry.duration;
        totals.minorMaxMs = Math.max(totals.minorMaxMs, entry.duration);
      } else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
        totals.major++;
        totals.majorMs += entry.duration;
        totals.majorMaxMs = Math.max(totals.majorMaxMs, entry.duration);
      }
    }
    // Observed after the GCs of this batch: growth counts, a full GC's shrinking does not.
    const now = oldBytes();
    if (now > lastOld) totals.oldGrowthBytes += now - lastOld;
    lastOld = now;
  }).observe({ entryTypes: ['gc'] });
  setInterval(() => writeFileSync(file, JSON.stringify(totals)), 500).unref();
}
