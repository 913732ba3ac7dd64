/** FastAPI 422 `detail: [{loc, msg}]` → messages keyed by dotted field (loc minus "body"). */

export interface FieldIssue {
  loc: (string | number)[];
  msg: string;
}

function isIssue(value: unknown): value is FieldIssue {
  return (
    typeof value === "object" &&
    value !== null &&
    Array.isArray((value as FieldIssue).loc) &&
    typeof (value as FieldIssue).msg === "string"
  );
}

/** Pydantic prefixes ValueErrors with "Value error, "; people need only the sentence. */
export function cleanMessage(msg: string): string {
  return msg.replace(/^(Value|Assertion) error, /, "");
}

/** The dotted field of a loc: ["body","parallelism","devices"] → "parallelism.devices". */
export function dottedField(loc: (string | number)[]): string {
  const parts = loc[0] === "body" ? loc.slice(1) : loc;
  return parts.map(String).join(".");
}

/**
 * Group a 422 detail by the longest known field it falls under; the rest go to "" (the form).
 * `known` are the dotted fields the form shows errors next to.
 */
export function fieldErrors(detail: unknown, known: readonly string[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const add = (field: string, msg: string) => out.set(field, [...(out.get(field) ?? []), msg]);
  if (!Array.isArray(detail)) {
    add("", typeof detail === "string" ? detail : "the server refused the request");
    return out;
  }
  const knownSet = new Set(known);
  for (const item of detail) {
    if (!isIssue(item)) continue;
    const parts = dottedField(item.loc).split(".").filter((p) => p !== "");
    let field = "";
    for (let n = parts.length; n > 0; n -= 1) {
      const candidate = parts.slice(0, n).join(".");
      if (knownSet.has(candidate)) {
        field = candidate;
        break;
      }
    }
    const message = cleanMessage(item.msg);
    // A model validator may name a deeper field in its sentence ("hyperparameters.lr must be
    // <= 10" at loc hyperparameters): show it next to that field when the form has it.
    const named = /^([\w]+(?:\.[\w]+)+)\b/.exec(message)?.[1];
    if (named && knownSet.has(named) && (field === "" || named.startsWith(`${field}.`))) {
      add(named, message);
      continue;
    }
    const where = field === dottedField(item.loc) || parts.length === 0 ? "" : `${dottedField(item.loc)}: `;
    add(field, where + message);
  }
  return out;
}
