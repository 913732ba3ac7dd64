/**
 * The job's log: the live tail (following its newest line until the reader scrolls up),
 * a search over every stored line (the server's `q`), a per-rank filter and the whole log
 * as a download.
 */
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import type { LogLine } from "../api/types";
import { client, ok } from "../api/http";
import { followAfterScroll } from "../lib/logFollow";
import type { LogTail } from "../lib/stores";

/** The newest matching lines a search shows. */
const SEARCH_LIMIT = 1000;
const key = (l: LogLine) => `${l.attempt_id}:${l.rank}:${l.stream}:${l.seq}`;

interface Found {
  query: string;
  rank: string;
  lines: LogLine[];
}

/**
 * The margin around the viewport within which the pane counts as in view (`onNear`): the one
 * within which Chromium renders a `content-visibility: auto` box (styles.css, `.log-box`; away
 * from the viewport the box is not painted, and laid out only for the scroll to its newest
 * line after a render), half the viewport's height.
 */
const NEAR_MARGIN = "50% 0px";

/**
 * `ranks`: every rank of the current attempt (listed in the filter before it has printed).
 * `onNear`: told when the pane comes within NEAR_MARGIN of the viewport and when it leaves it.
 */
export function LogView({ jobId, tail, ranks: attempt = [], onNear }: { jobId: number; tail: LogTail; ranks?: number[]; onNear?: (near: boolean) => void }) {
  const box = useRef<HTMLPreElement>(null);
  const outer = useRef<HTMLDivElement>(null);
  const nearChanged = useRef(onNear);
  nearChanged.current = onNear;
  const [follow, setFollow] = useState(true);
  const following = useRef(true);
  following.current = follow;
  const lastTop = useRef(0);
  const [query, setQuery] = useState("");
  const [rank, setRank] = useState("");
  const [found, setFound] = useState<Found | null>(null);
  const [searchError, setSearchError] = useState<string | null>(null);
  const needle = query.trim();
  const [capped, setCapped] = useState<{ dropped: number; cap: number } | null>(null);

  // How many of the oldest lines the per-attempt cap deleted: asked now and every 30 s.
  useEffect(() => {
    const ask = () =>
      ok(client.GET("/api/jobs/{job_id}/logs", { params: { path: { job_id: jobId }, query: { limit: 1 } } }))
        .then((got) => setCapped({ dropped: got.dropped ?? 0, cap: got.cap }))
        .catch(() => undefined);
    void ask();
    const timer = setInterval(ask, 30_000);
    return () => clearInterval(timer);
  }, [jobId]);

  // After every render (new lines, a filter): back to the newest line while following, in the
  // next animation frame, before it paints. Scrolling reads the layout; done right after the
  // render (a layout effect), it made the browser lay the page out twice for one frame, the
  // second time for whatever the charts drew in between (issue #33).
  const scrolling = useRef<number | null>(null);
  useLayoutEffect(() => {
    if (scrolling.current !== null) return;
    scrolling.current = requestAnimationFrame(() => {
      scrolling.current = null;
      const el = box.current;
      if (!el) return;
      if (following.current) el.scrollTop = el.scrollHeight;
      lastTop.current = el.scrollTop;
    });
  });
  useEffect(() => {
    let near = true;
    const seen = new IntersectionObserver(
      (entries) => {
        const now = entries[entries.length - 1]!.isIntersecting;
        if (now !== near) nearChanged.current?.((near = now));
      },
      { rootMargin: NEAR_MARGIN },
    );
    seen.observe(outer.current!);
    return () => {
      seen.disconnect();
      if (scrolling.current !== null) cancelAnimationFrame(scrolling.current);
    };
  }, []);

  // A search asks the server (every stored line, not only the tail held here), 300 ms after typing.
  useEffect(() => {
    if (!needle) {
      setFound(null);
      setSearchError(null);
      return;
    }
    let live = true;
    const timer = setTimeout(() => {
      const filter = rank === "" ? {} : { rank: Number(rank) };
      ok(client.GET("/api/jobs/{job_id}/logs", { params: { path: { job_id: jobId }, query: { q: needle, limit: SEARCH_LIMIT, ...filter } } }))
        .then((got) => {
          if (!live) return;
          setFound({ query: needle, rank, lines: got.lines });
          setSearchError(null);
        })
        .catch((err: unknown) => live && setSearchError(String(err instanceof Error ? err.message : err)));
    }, 300);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [jobId, needle, rank]);

  const ranks = [...new Set([...attempt, ...tail.lines.map((l) => l.rank)])].sort((a, b) => a - b);
  const lower = needle.toLowerCase();
  const matches = (l: LogLine) => (rank === "" || l.rank === Number(rank)) && (!lower || l.line.toLowerCase().includes(lower));
  const liveLines = tail.lines.filter(matches);
  // while searching: the server's matches, then matching lines that arrived since
  const searched = found && found.query === needle && found.rank === rank;
  let lines = liveLines;
  if (needle && searched) {
    const seen = new Set(found.lines.map(key));
    lines = [...found.lines, ...liveLines.filter((l) => !seen.has(key(l)))];
  }

  const jump = () => {
    setFollow(true);
    const el = box.current;
    if (el) el.scrollTop = el.scrollHeight;
  };

  return (
    <div>
      <h2>Log</h2>
      <div class="log-tools">
        <input type="search" placeholder="Search the whole log" aria-label="Search the whole log" data-testid="log-search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
        <select aria-label="Rank" data-testid="log-rank" value={rank} onChange={(e) => setRank(e.currentTarget.value)}>
          <option value="">all ranks</option>
          {ranks.map((r) => (
            <option value={String(r)}>rank {r}</option>
          ))}
        </select>
        <label class="small" title="Keep the newest line in view">
          <input type="checkbox" data-testid="log-follow" checked={follow} onChange={(e) => setFollow(e.currentTarget.checked)} /> follow
        </label>
        <a class="button secondary small" data-testid="log-download" href={`/api/jobs/${jobId}/logs.txt`} download>
          Download log
        </a>
      </div>
      <p class="muted small" data-testid="log-status" aria-live="polite">
        {needle
          ? searchError
            ? `Search failed: ${searchError}`
            : searched
              ? `${lines.length} matching line${lines.length === 1 ? "" : "s"} in the whole log${found.lines.length >= SEARCH_LIMIT ? ` (the newest ${SEARCH_LIMIT})` : ""}`
              : "Searching the whole log…"
          : rank !== ""
            ? `${lines.length} of the newest ${tail.lines.length} lines`
            : `The newest ${tail.lines.length} lines, live`}
        {capped && capped.dropped > 0 ? <span data-testid="log-dropped">{` · ${capped.dropped.toLocaleString()} earlier lines dropped (cap ${capped.cap.toLocaleString()} per attempt)`}</span> : null}
      </p>
      <div class="log-box" ref={outer}>
        <pre
          ref={box}
          class="logs"
          data-testid="job-logs"
          data-following={String(follow)}
          tabIndex={0}
          aria-label="Log lines"
          onScroll={(e) => {
            const el = e.currentTarget;
            const next = followAfterScroll(following.current, lastTop.current, el);
            lastTop.current = el.scrollTop;
            if (next !== following.current) {
              following.current = next;
              setFollow(next);
            }
          }}
        >
          {tail.lines.length === 0 && !needle
            ? "No output yet."
            : lines.length === 0
              ? "No line matches."
              : lines.map((l) => (
                  <div key={key(l)} class={l.stream === "stderr" ? "stderr" : undefined}>
                    <span class="muted">[{l.rank}]</span> {l.line}
                  </div>
                ))}
        </pre>
        {!follow && (
          <button type="button" class="log-jump small" data-testid="log-jump" onClick={jump}>
            Jump to latest ↓
          </button>
        )}
      </div>
    </div>
  );
}
