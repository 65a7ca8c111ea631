// Counts the turns of the event loop, as another request waiting to be read would see them: a
// task that runs once per turn (setImmediate) from now until `stop()`. Work that keeps the loop
// for itself shows as few turns; work that lets go at every pause, as a turn per pause.
export function countLoopTurns(): { readonly turns: number; stop(): void } {
  let turns = 0;
  let stopped = false;
  const tick = () => {
    if (stopped) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  return {
    get turns() {
      return turns;
    },
    stop() {
      stopped = true;
    },
  };
}
