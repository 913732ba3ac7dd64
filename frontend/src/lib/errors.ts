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

/** Pydantic's sentences for common refusals, in the words a person filling a spec uses. */
const PLAIN: [RegExp, (m: RegExpExecArray) => string][] = [
  [/^Field required$/, () => "is required"],
  [/^Extra inputs are not permitted$/, () => "is not a setting of a job spec (misspelt, or in the wrong section?)"],
  [/^Input should be a valid integer.*$/, () => "must be a whole number"],
  [/^Input should be a valid number.*$/, () => "must be a number"],
  [/^Input should be a valid boolean.*$/, () => "must be true or false"],
  [/^Input should be a valid string$/, () => "must be text"],
  [/^Input should be a valid (dictionary|object).*$/, () => "must be a mapping of names to values"],
  [/^Input should be a valid list$/, () => "must be a list"],
  [/^Input should be greater than or equal to (.+)$/, (m) => `must be at least ${m[1]}`],
  [/^Input should be greater than (.+)$/, (m) => `must be more than ${m[1]}`],
  [/^Input should be less than or equal to (.+)$/, (m) => `must be at most ${m[1]}`],
  [/^Input should be less than (.+)$/, (m) => `must be less than ${m[1]}`],
  [/^Input should be (.+)$/, (m) => `must be ${m[1]}`],
  [/^String should have at most (\d+) characters?$/, (m) => `must be at most ${m[1]} characters`],
  [/^String should have at least (\d+) characters?$/, (m) => `must be at least ${m[1]} characters`],
  [/^String should match pattern '(.+)'$/, () => "has characters that are not allowed here"],
  [/^List should have at most (\d+) items?.*$/, (m) => `must have at most ${m[1]} entries`],
];

/** One refusal in plain words. */
export function plainMessage(msg: string): string {
  const clean = cleanMessage(msg);
  for (const [pattern, say] of PLAIN) {
    const m = pattern.exec(clean);
    if (m) return say(m);
  }
  return clean;
}

/**
 * Every refusal of a 422 as one line each, "field: what is wrong" in plain words (for a
 * pasted spec, shown under the paste box: the form's fields may not show the pasted ones).
 */
export function plainIssues(detail: unknown): string[] {
  if (!Array.isArray(detail)) return [typeof detail === "string" ? detail : "the server refused the spec"];
  const lines = detail.filter(isIssue).map((item) => {
    const field = dottedField(item.loc);
    const message = plainMessage(item.msg);
    // a model validator's sentence names its field itself
    return field === "" || message.startsWith(field) ? message : `${field}: ${message}`;
  });
  return lines.length ? [...new Set(lines)] : ["the server refused the spec"];
}
