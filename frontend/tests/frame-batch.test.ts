import { describe, expect, it } from "vitest";
import { BuildQueue, FrameBatch, mergeJobChanges, RedrawQueue, throttle, type JobChanges } from "../src/lib/frameBatch";
import { MetricStore } from "../src/lib/series";
import { rankTimes } from "../src/lib/steptimes";

/** A hand-driven frame clock: `frame()` runs what was scheduled, like one animation frame. */
function clock() {
  let queued: (() => void)[] = [];
  let asked = 0;
  return {
    schedule: (run: () => void) => {
      asked += 1;
      queued.push(run);
      return asked;
    },
    cancel: () => {
      queued = [];
    },
    frame: () => {
      const run = queued;
      queued = [];
      run.forEach((fn) => fn());
    },
    get asked() {
      return asked;
    },
  };
}

const change = (names: string[], logs = false, events = false): JobChanges => ({ names: new Set(names), logs, events });

describe("FrameBatch", () => {
  it("flushes every message of a frame in one call and asks for one frame", () => {
    const c = clock();
    const flushed: JobChanges[] = [];
    const batch = new FrameBatch(mergeJobChanges, (b) => flushed.push(b), c.schedule, c.cancel);
    for (let i = 0; i < 100; i += 1) batch.add(change(i % 2 ? ["loss"] : ["lr"], i === 50, i === 70));
    expect(flushed).toHaveLength(0);
    expect(c.asked).toBe(1);
    c.frame();
    expect(flushed).toHaveLength(1);
    expect([...flushed[0]!.names].sort()).toEqual(["loss", "lr"]);
    expect(flushed[0]!.logs).toBe(true);
    expect(flushed[0]!.events).toBe(true);
  });

  it("starts a new batch after a flush and flushes nothing for a frame without messages", () => {
    const c = clock();
    const flushed: JobChanges[] = [];
    const batch = new FrameBatch(mergeJobChanges, (b) => flushed.push(b), c.schedule, c.cancel);
    batch.add(change(["loss"], true));
    c.frame();
    batch.add(change(["step_time"]));
    c.frame();
    c.frame();
    expect(flushed.map((b) => [[...b.names], b.logs])).toEqual([
      [["loss"], true],
      [["step_time"], false],
    ]);
    expect(c.asked).toBe(2);
  });

  it("does not mutate the first message's set, and drops what is pending on dispose", () => {
    const c = clock();
    const flushed: JobChanges[] = [];
    const batch = new FrameBatch(mergeJobChanges, (b) => flushed.push(b), c.schedule, c.cancel);
    const first = change(["loss"]);
    batch.add(first);
    batch.add(change(["lr"]));
    expect([...first.names]).toEqual(["loss"]);
    batch.dispose();
    c.frame();
    expect(flushed).toHaveLength(0);
  });
});

describe("step times read each rank's newest values without copying the series", () => {
  it("means the last 20 values per rank, skipping what arrived out of order correctly", () => {
    const store = new MetricStore(100);
    for (let step = 0; step < 150; step += 1) {
      store.add("step_time", 0, step, step < 130 ? 1 : 2); // last 20: all 2
      store.add("step_time", 1, step, 1);
    }
    store.add("step_time", 2, 5, 9); // rank 2: out of order below
    store.add("step_time", 2, 3, 3);
    const rows = rankTimes(store);
    expect(rows.map((r) => [r.rank, r.step_time])).toEqual([
      [0, 2],
      [1, 1],
      [2, 6],
    ]);
    expect(store.newest("step_time", 2, 1)).toEqual([9]); // x order: step 5 is the newest
    expect(store.newest("step_time", 0, 3)).toEqual([2, 2, 2]);
  });
});

describe("RedrawQueue: every chart of a page in one paced queue", () => {
  /** Frames, timers and microtasks run by hand; `now` moves only when told. */
  function rig(spacing = 8) {
    let now = 0;
    let frames: (() => void)[] = [];
    let timers: { at: number; run: () => void }[] = [];
    let micro: (() => void)[] = [];
    const queue = new RedrawQueue(
      spacing,
      () => now,
      (run) => {
        frames.push(run);
        return frames.length;
      },
      () => (frames = []),
      (run, ms) => {
        timers.push({ at: now + ms, run });
        return 0 as unknown as ReturnType<typeof setTimeout>;
      },
      (run) => micro.push(run),
    );
    const frame = () => {
      const run = frames;
      frames = [];
      run.forEach((fn) => fn());
      const tasks = micro;
      micro = [];
      tasks.forEach((fn) => fn());
    };
    const advance = (ms: number) => {
      now += ms;
      const due = timers.filter((t) => t.at <= now);
      timers = timers.filter((t) => t.at > now);
      due.forEach((t) => t.run());
    };
    return {
      queue,
      frame,
      advance,
      spend: (ms: number) => (now += ms),
      get frames() {
        return frames.length;
      },
    };
  }

  it("redraws one chart per frame, in the order they asked, each once however often asked", () => {
    const r = rig();
    const drawn: string[] = [];
    const a = () => drawn.push("a");
    const b = () => drawn.push("b");
    r.queue.request(a);
    r.queue.request(b);
    r.queue.request(a);
    expect(r.frames).toBe(1);
    r.frame();
    expect(drawn).toEqual(["a"]);
    r.frame();
    expect(drawn).toEqual(["a", "b"]);
    expect(r.queue.pending).toBe(0);
    r.frame();
    expect(drawn).toEqual(["a", "b"]);
  });

  it("after a redraw that cost c ms, the next of any chart waits spacing x c from its start", () => {
    const r = rig(8);
    const drawn: string[] = [];
    r.queue.request(() => {
      drawn.push("a");
      r.spend(5); // 5 ms, draw included
    });
    r.queue.request(() => drawn.push("b"));
    r.frame();
    expect(drawn).toEqual(["a"]);
    expect(r.frames).toBe(0); // b waits 8 x 5 = 40 ms after a began
    r.advance(34);
    expect(r.frames).toBe(0);
    r.advance(1);
    expect(r.frames).toBe(1);
    r.frame();
    expect(drawn).toEqual(["a", "b"]);
  });

  it("a cancelled chart is not drawn", () => {
    const r = rig();
    const drawn: string[] = [];
    const a = () => drawn.push("a");
    r.queue.request(a);
    r.queue.cancel(a);
    r.frame();
    expect(drawn).toEqual([]);
  });
});

describe("BuildQueue: charts mounted together build one per frame", () => {
  /** A queue whose frames and task ends the test runs by hand. */
  function harness() {
    const frames: (() => void)[] = [];
    const taskEnds: (() => void)[] = [];
    const queue = new BuildQueue(
      (run) => frames.push(run),
      (run) => taskEnds.push(run),
    );
    const built: string[] = [];
    const frame = () => frames.shift()!();
    const endTask = () => taskEnds.splice(0).forEach((run) => run());
    return { queue, built, frames, frame, endTask };
  }

  it("builds the first of a task at once and each other one after a frame of its own, in order", () => {
    const { queue, built, frames, frame, endTask } = harness();
    for (const name of ["loss", "lr", "grad_norm"]) queue.add(() => built.push(name));
    expect(built).toEqual(["loss"]); // before the paint
    expect(queue.pending).toBe(2);
    endTask();
    expect(frames.length).toBe(1); // one frame asked, however many wait
    frame();
    expect(built).toEqual(["loss", "lr"]);
    frame();
    expect(built).toEqual(["loss", "lr", "grad_norm"]);
    expect(frames.length).toBe(0);
    // a later task's first chart builds at once again
    queue.add(() => built.push("peak_mem"));
    expect(built.at(-1)).toBe("peak_mem");
  });

  it("a chart mounted while others wait waits behind them; a cancelled one is never built", () => {
    const { queue, built, frame, endTask } = harness();
    queue.add(() => built.push("a"));
    const cancelB = queue.add(() => built.push("b"));
    queue.add(() => built.push("c"));
    endTask();
    queue.add(() => built.push("d")); // a new task, but b and c wait: d goes after them
    expect(built).toEqual(["a"]);
    cancelB();
    frame();
    frame();
    expect(built).toEqual(["a", "c", "d"]);
    expect(queue.pending).toBe(0);
  });
});

describe("throttle", () => {
  it("runs at once, then folds the calls within ms into one at the end of it", () => {
    let now = 0;
    const timers: { at: number; run: () => void }[] = [];
    let calls = 0;
    const t = throttle(
      () => (calls += 1),
      250,
      () => now,
      (run, ms) => {
        timers.push({ at: now + ms, run });
        return 0 as unknown as ReturnType<typeof setTimeout>;
      },
    );
    t.run();
    expect(calls).toBe(1);
    now = 100;
    t.run();
    t.run();
    expect(calls).toBe(1);
    expect(timers.map((x) => x.at)).toEqual([250]);
    now = 250;
    timers.shift()!.run();
    expect(calls).toBe(2); // the last call is never lost
    now = 600;
    t.run();
    expect(calls).toBe(3);
  });

  it("reads a function's ms at each call (a pane out of view waits longer)", () => {
    let now = 0;
    let ms = 250;
    const timers: number[] = [];
    let calls = 0;
    const t = throttle(
      () => (calls += 1),
      () => ms,
      () => now,
      (_run, wait) => {
        timers.push(now + wait);
        return 0 as unknown as ReturnType<typeof setTimeout>;
      },
    );
    t.run();
    ms = 1000;
    now = 100;
    t.run();
    expect(timers).toEqual([1000]);
    expect(calls).toBe(1);
  });
});
