/** A tiny history router: real URLs (deep links), back/forward via popstate. */
import type { AnchorHTMLAttributes, ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";

export type Route =
  | { name: "board" }
  | { name: "submit"; clone: number | null; fromStep: number | null }
  | { name: "compare"; ids: number[] }
  | { name: "job"; id: number }
  | { name: "cluster" }
  | { name: "runs" }
  | { name: "usage" }
  | { name: "sweeps" }
  | { name: "sweep"; id: number }
  | { name: "login"; next: string }
  | { name: "notfound"; path: string };

/** Decode a path (and query) into a route. */
export function parseRoute(path: string, search = ""): Route {
  const clean = path.replace(/\/+$/, "") || "/";
  if (clean === "/") return { name: "board" };
  const query = new URLSearchParams(search);
  if (clean === "/submit") {
    const clone = query.get("clone");
    const step = query.get("from_step");
    const id = clone && /^\d+$/.test(clone) ? Number(clone) : null;
    // a checkpoint step only with the job it belongs to
    return { name: "submit", clone: id, fromStep: id !== null && step && /^\d+$/.test(step) ? Number(step) : null };
  }
  if (clean === "/compare") return { name: "compare", ids: parseIds(query.get("jobs")) };
  if (clean === "/cluster") return { name: "cluster" };
  if (clean === "/runs") return { name: "runs" };
  if (clean === "/usage") return { name: "usage" };
  if (clean === "/login") {
    const next = query.get("next");
    // Only same-app paths: never bounce to another origin after login.
    return { name: "login", next: next && next.startsWith("/") && !next.startsWith("//") ? next : "/" };
  }
  if (clean === "/sweeps") return { name: "sweeps" };
  const sweep = /^\/sweeps\/(\d+)$/.exec(clean);
  if (sweep) return { name: "sweep", id: Number(sweep[1]) };
  const job = /^\/jobs\/(\d+)$/.exec(clean);
  if (job) return { name: "job", id: Number(job[1]) };
  return { name: "notfound", path: clean };
}

/** "3,5,9" → [3, 5, 9]: distinct job ids in the order given. */
export function parseIds(text: string | null): number[] {
  const ids = (text ?? "").split(",").filter((t) => /^\d+$/.test(t.trim())).map((t) => Number(t.trim()));
  return [...new Set(ids)];
}

const listeners = new Set<() => void>();
const notify = () => listeners.forEach((fn) => fn());
if (typeof window !== "undefined") window.addEventListener("popstate", notify);

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  if (to === currentPath()) return;
  if (options.replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  notify();
  window.scrollTo(0, 0);
}

export function currentPath(): string {
  return window.location.pathname + window.location.search;
}

/** The current route; re-renders on navigation. */
export function useRoute(): Route {
  const [, setTick] = useState(0);
  useEffect(() => {
    const fn = () => setTick((t) => t + 1);
    listeners.add(fn);
    return () => listeners.delete(fn);
  }, []);
  return parseRoute(window.location.pathname, window.location.search);
}

type LinkProps = AnchorHTMLAttributes<HTMLAnchorElement> & { href: string; children?: ComponentChildren };

/** An anchor that navigates in-app; modified clicks (new tab etc.) behave as usual. */
export function Link({ href, onClick, ...rest }: LinkProps) {
  return (
    <a
      href={href}
      onClick={(event) => {
        if (onClick) (onClick as (e: MouseEvent) => void)(event);
        if (event.defaultPrevented || event.button !== 0) return;
        if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        navigate(href);
      }}
      {...rest}
    />
  );
}
