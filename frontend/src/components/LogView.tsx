/** The live log tail with a text search and a per-rank filter; sticks to the bottom unless scrolled. */
import { useEffect, useRef, useState } from "preact/hooks";
import type { LogTail } from "../lib/stores";

/** `ranks`: every rank of the current attempt (listed in the filter before it has printed). */
export function LogView({ tail, ranks: attempt = [] }: { tail: LogTail; ranks?: number[] }) {
  const box = useRef<HTMLPreElement>(null);
  const stick = useRef(true);
  const [query, setQuery] = useState("");
  const [rank, setRank] = useState("");
  useEffect(() => {
    if (box.current && stick.current) box.current.scrollTop = box.current.scrollHeight;
  });
  const ranks = [...new Set([...attempt, ...tail.lines.map((l) => l.rank)])].sort((a, b) => a - b);
  const needle = query.trim().toLowerCase();
  const lines = tail.lines.filter((l) => (rank === "" || l.rank === Number(rank)) && (!needle || l.line.toLowerCase().includes(needle)));
  return (
    <div>
      <h2>Log tail</h2>
      <div class="log-tools">
        <input type="search" placeholder="Search the log" aria-label="Search the log" data-testid="log-search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
        <select aria-label="Rank" data-testid="log-rank" value={rank} onChange={(e) => setRank(e.currentTarget.value)}>
          <option value="">all ranks</option>
          {ranks.map((r) => (
            <option value={String(r)}>rank {r}</option>
          ))}
        </select>
        {lines.length !== tail.lines.length && (
          <span class="muted small">
            {lines.length} of {tail.lines.length} lines
          </span>
        )}
      </div>
      <pre
        ref={box}
        class="logs"
        data-testid="job-logs"
        tabIndex={0}
        onScroll={(e) => {
          const el = e.currentTarget;
          stick.current = el.scrollTop + el.clientHeight >= el.scrollHeight - 8;
        }}
      >
        {tail.lines.length === 0
          ? "No output yet."
          : lines.length === 0
            ? "No line matches."
            : lines.map((l) => (
                <div class={l.stream === "stderr" ? "stderr" : undefined}>
                  <span class="muted">[{l.rank}]</span> {l.line}
                </div>
              ))}
      </pre>
    </div>
  );
}
