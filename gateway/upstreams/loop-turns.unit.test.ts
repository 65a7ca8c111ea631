import { describe, expect, it } from 'vitest';
import { ReadTurns } from './loop-turns.ts';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function reader(bytesPerTurn: number) {
  const handedOn: string[] = [];
  const source = {
    paused: 0,
    pause() {
      source.paused++;
    },
    resume() {},
  };
  const turns = new ReadTurns((data) => handedOn.push(data.toString()), source, bytesPerTurn);
  return { turns, handedOn, source };
}

describe('ReadTurns', () => {
  it('past bytesPerTurn in one turn of the event loop: the rest waits for the next turn, in order, the source paused', async () => {
    const { turns, handedOn, source } = reader(10);
    turns.push(Buffer.from('0123456789'), false);
    turns.push(Buffer.from('a'), false);
    turns.after(() => handedOn.push('after'));
    expect(handedOn).toEqual(['0123456789']);
    expect(source.paused).toBe(1);
    await nextTurn();
    expect(handedOn).toEqual(['0123456789', 'a', 'after']);
    expect(turns.turnsWaited).toBe(1);
  });

  it('counts bytes per turn: a stream that sends a little each turn never waits, however much it sends in all', async () => {
    const { turns, handedOn, source } = reader(10);
    for (let i = 0; i < 50; i++) {
      turns.push(Buffer.from('01234'), false);
      await nextTurn();
    }
    expect(handedOn).toHaveLength(50);
    expect(turns.turnsWaited).toBe(0);
    expect(source.paused).toBe(0);
  });
});
