/**
 * A job's devices over its whole life, as the server gives them (GET /api/series/devices/{id}):
 * every attempt's samples on its own devices within its own span. The job page draws them from
 * the job's start, as its loss charts do, and adds the live samples of the attempt that holds
 * the devices now. Pure: unit-tested without a DOM.
 */
import type { AttemptDevices } from "../api/types";
import type { AlignedData } from "./series";

export interface Span {
  number: number;
  /** unix seconds; end null: the attempt holds its devices now */
  start: number;
  end: number | null;
}

export interface Slice {
  node: string;
  devices: number[];
}

export interface DeviceHistory {
  /** "node\0device" → [time, util %, memory bytes, temperature °C, power W]; a row of nulls between attempts breaks the line. */
  columns: Map<string, AlignedData>;
  /** "node\0device" → gpu or cpu, as its samples said. */
  kinds: Map<string, string>;
  /** Every device any attempt held, node by node in the order they first appear. */
  slices: Slice[];
  /** The attempts that ran, oldest first. */
  spans: Span[];
  /** Where live samples count from: the start of the attempt holding the devices now, else null (none do). */
  liveSince: number | null;
  /** The devices ("node\0device") of the attempt holding them now: only theirs take live samples. */
  live: Set<string>;
}

export function deviceKey(node: string, device: number): string {
  return `${node}\u0000${device}`;
}

/** The server's attempts as chart columns per device, the attempts' spans and devices. */
export function deviceHistory(attempts: AttemptDevices[]): DeviceHistory {
  const columns = new Map<string, AlignedData>();
  const kinds = new Map<string, string>();
  const slices: Slice[] = [];
  const spans: Span[] = [];
  for (const attempt of attempts) {
    if (attempt.start == null) continue;
    spans.push({ number: attempt.number, start: attempt.start, end: attempt.end ?? null });
    for (const d of attempt.devices) {
      addDevice(slices, d.node, d.device);
      const key = deviceKey(d.node, d.device);
      if (d.kind) kinds.set(key, d.kind);
      const rows: (number | null)[][] = [d.util, d.mem_used, d.temperature, d.power];
      const held = columns.get(key);
      if (!held) {
        columns.set(key, [[...d.time], ...rows.map((col) => [...col])] as AlignedData);
        continue;
      }
      if (d.time.length === 0) continue;
      if (held[0].length) {
        // a row of nulls between the earlier attempt's last sample and this one's first
        held[0].push((held[0][held[0].length - 1]! + d.time[0]!) / 2);
        for (let i = 1; i < held.length; i += 1) (held[i] as (number | null)[]).push(null);
      }
      held[0].push(...d.time);
      rows.forEach((col, i) => (held[i + 1] as (number | null)[]).push(...col));
    }
  }
  const last = attempts[attempts.length - 1];
  const liveSince = last && last.start != null && last.end == null ? last.start : null;
  const live = new Set(liveSince === null ? [] : last!.devices.map((d) => deviceKey(d.node, d.device)));
  return { columns, kinds, slices, spans, liveSince, live };
}

/** Whether the stored samples of a device hold a temperature or power reading. */
export function sensed(history: DeviceHistory | null | undefined, key: string): boolean {
  const columns = history?.columns.get(key);
  return !!columns && [columns[3]!, columns[4]!].some((col) => col.some((v) => v != null));
}

function addDevice(slices: Slice[], node: string, device: number): void {
  const slice = slices.find((s) => s.node === node);
  if (!slice) slices.push({ node, devices: [device] });
  else if (!slice.devices.includes(device)) slice.devices.push(device);
}

/** The slices of both lists, node by node (the first's order, then the second's new ones). */
export function unionSlices(first: Slice[], second: Slice[]): Slice[] {
  const out = first.map((s) => ({ node: s.node, devices: [...s.devices] }));
  for (const s of second) for (const d of s.devices) addDevice(out, s.node, d);
  return out;
}

/**
 * The stored rows of chosen columns, then the live rows after the last stored time: `pick`
 * chooses the columns after time (1, 2: util and memory; 3, 4: temperature and power). When the
 * stored rows end before `liveSince` (an earlier attempt's), a row of nulls breaks the line.
 */
export function withLive(history: AlignedData | undefined, pick: readonly number[], live: AlignedData, liveSince: number | null = null): AlignedData {
  if (!history || history[0].length === 0) return live;
  const stored = [history[0], ...pick.map((i) => history[i]!)] as AlignedData;
  const after = history[0][history[0].length - 1]!;
  const xs = live[0];
  let from = xs.length;
  while (from > 0 && xs[from - 1]! > after) from -= 1;
  if (from === xs.length) return stored;
  const gap = liveSince !== null && after < liveSince;
  return stored.map((col, i) => {
    const fresh = live[i]!.slice(from);
    if (!gap) return [...col, ...fresh];
    return [...col, i === 0 ? (after + xs[from]!) / 2 : null, ...fresh];
  }) as AlignedData;
}
