/**
 * Ticking runs to compare (board, run table, compare picker). Compare takes at most
 * MAX_COMPARE runs: one more tick is refused and said so, where it used to untick the first
 * run silently (issue #33).
 */
import { useState } from "preact/hooks";
import { navigate } from "../router";

/** The picks after ticking (on) or unticking id; null when a tick would exceed max. */
export function nextPicks(held: readonly number[], id: number, on: boolean, max: number): number[] | null {
  if (!on) return held.filter((x) => x !== id);
  if (held.includes(id)) return [...held];
  if (held.length >= max) return null;
  return [...held, id];
}

export function usePicks(max: number, initial: number[] = []) {
  const [picked, setPicked] = useState<number[]>(initial);
  const [refused, setRefused] = useState<number | null>(null);
  /** `box`: the checkbox ticked, unticked again when the tick is refused. */
  const pick = (id: number, on: boolean, box?: HTMLInputElement) => {
    const next = nextPicks(picked, id, on, max);
    if (next === null) {
      if (box) box.checked = false; // the state did not change, so no render would untick it
      setRefused(id);
      return;
    }
    setRefused(null);
    setPicked(next);
  };
  const clear = () => {
    setPicked([]);
    setRefused(null);
  };
  return { picked, pick, clear, refused };
}

/** The refusal of one tick too many, next to the Compare button. */
export function PickLimit({ refused, max }: { refused: number | null; max: number }) {
  if (refused === null) return null;
  return (
    <span class="warning small" role="status" data-testid="pick-limit">
      Compare takes at most {max} runs: untick one to add #{refused}.
    </span>
  );
}

/** The refusal, if any, and the button that opens Compare on the picked runs (shown once
 * one is picked, enabled from two). */
export function ComparePicked({
  picked,
  refused,
  max,
  testId,
}: {
  picked: readonly number[];
  refused: number | null;
  max: number;
  testId: string;
}) {
  return (
    <>
      <PickLimit refused={refused} max={max} />
      {picked.length > 0 && (
        <button type="button" class="secondary" data-testid={testId} disabled={picked.length < 2} onClick={() => navigate(`/compare?jobs=${picked.join(",")}`)}>
          Compare {picked.length} selected
        </button>
      )}
    </>
  );
}
