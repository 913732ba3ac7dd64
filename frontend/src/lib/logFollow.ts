/**
 * Whether a log pane follows its newest line. A scroll event alone cannot say who moved the
 * box: lines appended between our scroll to the bottom and the event (several messages can
 * arrive in one frame) made the old "at the bottom now?" test read "no" and stop following
 * while nobody had touched the pane (issue #33: step 546 shown while the job was at 567).
 * Here only a move *up* by the reader stops following, and reaching the bottom resumes it.
 */

export interface ScrollBox {
  scrollTop: number;
  clientHeight: number;
  scrollHeight: number;
}

/** Pixels from the bottom that still count as "at the bottom". */
export const BOTTOM_SLACK = 4;

export function atBottom(box: ScrollBox, slack = BOTTOM_SLACK): boolean {
  return box.scrollHeight - box.clientHeight - box.scrollTop <= slack;
}

/**
 * Following after a scroll event. `lastTop`: the box's scrollTop as we last left it (after our
 * own scroll to the bottom, or the previous event). At the bottom: follow. Moved up: the reader
 * scrolled back, stop. Otherwise (the content grew under the box, or it moved down without
 * reaching the bottom): unchanged.
 */
export function followAfterScroll(following: boolean, lastTop: number, box: ScrollBox): boolean {
  if (atBottom(box)) return true;
  if (box.scrollTop < lastTop - 1) return false;
  return following;
}
