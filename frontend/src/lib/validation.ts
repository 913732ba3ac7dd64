/**
 * The submit form's live check: the candidate spec is sent to POST /api/jobs/validate a moment
 * after the last change, and the server's answer (implications, memory estimate, problems by
 * field) is what the form shows. The browser keeps no copy of the spec's rules.
 */
import { ApiError } from "../api/http";
import type { components } from "../api/schema";
import { dottedField, fieldErrors } from "./errors";

export type ValidationAnswer = components["schemas"]["ValidationOut"];

/** What the form shows of the server's answer for the spec it last sent. */
export interface Checked {
  /** "checking": a newer spec than the one answered waits to be sent or answered. */
  status: "checking" | "done" | "failed";
  /** The answer to a spec the schema accepts; null for a refused spec (a 422) or before one. */
  answer: ValidationAnswer | null;
  /** Every refusal, field → messages (a 422's detail or the answer's problems; "" = the form). */
  problems: Map<string, string[]>;
}

/** The server's answer to one spec, or why there is none (an ApiError 422: the spec's refusals). */
export type Outcome = { answer: ValidationAnswer } | { error: unknown };

export const UNCHECKED: Checked = { status: "checking", answer: null, problems: new Map() };

/** The server's answer (or refusal) → what the form shows, problems grouped by the known fields. */
export function checkedFrom(outcome: Outcome, known: readonly string[]): Checked {
  if ("answer" in outcome) {
    return { status: "done", answer: outcome.answer, problems: fieldErrors(outcome.answer.problems, known) };
  }
  const err = outcome.error;
  if (err instanceof ApiError && err.status === 422) return { status: "done", answer: null, problems: fieldErrors(err.detail, known) };
  return { status: "failed", answer: null, problems: new Map([["", [`could not check the spec: ${String(err)}`]]]) };
}

/** The submit errors and the live problems of one field, each message once. */
export function mergeProblems(...sources: Map<string, string[]>[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const source of sources) {
    for (const [field, messages] of source) out.set(field, [...new Set([...(out.get(field) ?? []), ...messages])]);
  }
  return out;
}

/**
 * Sends a spec `delay` ms after the last `check`, and reports only the outcome for the newest
 * spec: an older answer arriving late is dropped. Coming back to the spec last sent sends
 * nothing again (its answer is reported again, or when it comes).
 */
export class Validator {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private seq = 0;
  /** The request whose outcome is reported: the newest spec's. */
  private wanted = 0;
  private sent: { key: string; id: number; outcome: Outcome | null } | null = null;

  constructor(
    private readonly send: (spec: Record<string, unknown>) => Promise<ValidationAnswer>,
    private readonly report: (outcome: Outcome) => void,
    private readonly delay = 400,
  ) {}

  /** Check this spec (true: it is sent after the delay; false: it is the one last sent). */
  check(spec: Record<string, unknown>): boolean {
    const key = JSON.stringify(spec);
    clearTimeout(this.timer);
    if (this.sent?.key === key) {
      this.wanted = this.sent.id;
      if (this.sent.outcome) this.report(this.sent.outcome);
      return false;
    }
    const id = ++this.seq;
    this.wanted = id;
    this.timer = setTimeout(() => {
      const sent = { key, id, outcome: null as Outcome | null };
      this.sent = sent;
      const settle = (outcome: Outcome) => {
        sent.outcome = outcome;
        if (id === this.wanted) this.report(outcome);
      };
      this.send(spec).then(
        (answer) => settle({ answer }),
        (error: unknown) => settle({ error }),
      );
    }, this.delay);
    return true;
  }

  /** Send nothing more and drop any answer still to come (the form went away). */
  dispose(): void {
    clearTimeout(this.timer);
    this.wanted = -1;
  }
}

/**
 * "Fits the cluster" from the server's answer: "no: <why>" when it refuses the device count
 * (no registered node could ever hold the gang), "yes" when it does not; null while unknown or
 * when the spec waits for capacity (the server does not check it then).
 */
export function capacityVerdict(answer: ValidationAnswer | null, waitsForCapacity: boolean): string | null {
  if (!answer || waitsForCapacity) return null;
  const refused = answer.problems.find((p) => dottedField(p.loc) === "parallelism.devices");
  return refused ? `no: ${refused.msg}` : "yes";
}
