import { describe, expect, it } from "vitest";
import { atBottom, followAfterScroll, type ScrollBox } from "../src/lib/logFollow";

/** A 300-px pane over `lines` lines of 15 px, scrolled to `top`. */
function pane(lines: number, top: number): ScrollBox {
  return { scrollTop: top, clientHeight: 300, scrollHeight: lines * 15 };
}

describe("following the log tail", () => {
  it("counts a box within a few pixels of its end as at the bottom", () => {
    expect(atBottom(pane(100, 1200))).toBe(true);
    expect(atBottom(pane(100, 1197))).toBe(true);
    expect(atBottom(pane(100, 1190))).toBe(false);
    expect(atBottom(pane(10, 0))).toBe(true); // shorter than the pane
  });

  it("keeps following when lines arrive between our scroll and the scroll event", () => {
    // We scrolled to the bottom of 100 lines (top 1200); before the event fired, 21 more
    // lines arrived (the 546 → 567). The old rule (at the bottom now?) said no.
    const grown = pane(121, 1200);
    const oldRule = grown.scrollTop + grown.clientHeight >= grown.scrollHeight - 8;
    expect(oldRule).toBe(false);
    expect(followAfterScroll(true, 1200, grown)).toBe(true);
  });

  it("stops when the reader scrolls up, and resumes at the bottom", () => {
    expect(followAfterScroll(true, 1200, pane(100, 1100))).toBe(false);
    expect(followAfterScroll(false, 1100, pane(120, 1150))).toBe(false); // down, not there yet
    expect(followAfterScroll(false, 1150, pane(120, 1500))).toBe(true);
  });

  it("stays paused while lines arrive under a reader who scrolled up", () => {
    expect(followAfterScroll(false, 600, pane(200, 600))).toBe(false);
  });

  it("follows when the tail drops old lines and the box is clamped at its end", () => {
    // 500 lines capped: the oldest drop, the box shrinks, the browser clamps scrollTop down
    expect(followAfterScroll(true, 7200, pane(490, 7050))).toBe(true);
  });
});
