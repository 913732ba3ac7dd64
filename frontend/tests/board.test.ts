import { describe, expect, it } from "vitest";
import type { Job } from "../src/api/types";
import { etaSeconds, filtersFromQuery, filtersToQuery, matches, NO_FILTERS, queueOrder, sections } from "../src/lib/board";

// the server's phase of each state (backend/jobs/states.PHASES): the board groups by it
const PHASE: Record<string, string> = {
  queued: "waiting", scheduled: "active", running: "active", cancelling: "active", pausing: "active",
  restarting: "active", paused: "paused", succeeded: "finished", failed: "finished", cancelled: "finished",
  stopped: "finished",
};
const job = (id: number, state: string, extra: Partial<Job> = {}): Job =>
  ({ id, state, phase: PHASE[state], name: `job-${id}`, owner: "admin", tags: [], priority: "normal", step: 0, total_steps: null, started_at: null, ...extra }) as Job;

describe("board", () => {
  it("orders the queue like the scheduler: priority, then submission", () => {
    const jobs = [job(1, "queued"), job(2, "queued", { priority: "low" }), job(3, "queued", { priority: "high" }), job(4, "running"), job(5, "queued")];
    expect(queueOrder(jobs).map((j) => j.id)).toEqual([3, 1, 5, 2]);
  });

  it("follows the scheduler's places once it has numbered the queue (fair share within a priority)", () => {
    const jobs = [
      job(1, "queued", { queue_position: 2 }), // its owner used more recently
      job(2, "queued", { queue_position: 1 }),
      job(3, "queued", { priority: "high" }), // not numbered yet: after the numbered ones
    ];
    expect(queueOrder(jobs).map((j) => j.id)).toEqual([2, 1, 3]);
  });

  it("splits into queued, active and done", () => {
    const s = sections([job(1, "succeeded"), job(2, "running"), job(3, "queued"), job(4, "paused"), job(5, "pausing")]);
    expect(s.queued.map((j) => j.id)).toEqual([3]);
    expect(s.active.map((j) => j.id)).toEqual([2, 5]);
    expect(s.done.map((j) => j.id)).toEqual([4, 1]);
  });

  it("filters by state group, owner, tag and name or id", () => {
    const a = job(7, "running", { owner: "ana", tags: ["sweep"], name: "lr-sweep-1" });
    expect(matches(a, NO_FILTERS)).toBe(true);
    expect(matches(a, { ...NO_FILTERS, state: "active" })).toBe(true);
    expect(matches(a, { ...NO_FILTERS, state: "finished" })).toBe(false);
    expect(matches(a, { ...NO_FILTERS, owner: "bo" })).toBe(false);
    expect(matches(a, { ...NO_FILTERS, tag: "sweep", q: "SWEEP" })).toBe(true);
    expect(matches(a, { ...NO_FILTERS, q: "#7" })).toBe(true);
    expect(matches(a, { ...NO_FILTERS, q: "other" })).toBe(false);
  });

  it("keeps filters in the query string", () => {
    const f = { ...NO_FILTERS, state: "queued", q: "a b" };
    expect(filtersToQuery(f)).toBe("?state=queued&q=a+b");
    expect(filtersFromQuery(filtersToQuery(f))).toEqual(f);
    expect(filtersToQuery(NO_FILTERS)).toBe("");
  });

  it("estimates the time left from the pace so far", () => {
    const started = new Date(0).toISOString();
    expect(etaSeconds({ step: 100, total_steps: 300, started_at: started }, 50_000)).toBe(100);
    expect(etaSeconds({ step: 0, total_steps: 300, started_at: started }, 50_000)).toBeNull();
    expect(etaSeconds({ step: 5, total_steps: null, started_at: started })).toBeNull();
  });
});
