import { describe, expect, it } from "vitest";
import type { VNode } from "preact";
import { Markdown } from "../src/lib/markdown";

/** A rendered tree as nested [tag, props-of-interest, ...children] for assertions. */
function shape(node: unknown): unknown {
  if (typeof node === "string" || typeof node === "number") return String(node);
  const vnode = node as VNode<Record<string, unknown>>;
  const { children, ...props } = vnode.props;
  expect(Object.keys(props)).not.toContain("dangerouslySetInnerHTML");
  const kids = (Array.isArray(children) ? children.flat(Infinity) : [children]).filter(
    (c) => c !== null && c !== undefined && typeof c !== "boolean",
  );
  const merged: unknown[] = []; // adjacent text pieces read as one
  for (const kid of kids.map(shape)) {
    const last = merged.length - 1;
    if (typeof kid === "string" && typeof merged[last] === "string") merged[last] += kid;
    else merged.push(kid);
  }
  return [vnode.type, props.href ?? null, ...merged];
}

const render = (text: string) => shape(Markdown({ text }));

describe("notes markdown", () => {
  it("renders headings, emphasis, code and lists", () => {
    expect(render("# Why\nlr **too** high, see `lr`\n\n- one\n- *two*")).toEqual([
      "div",
      null,
      ["h3", null, "Why"],
      ["p", null, "lr ", ["strong", null, "too"], " high, see ", ["code", null, "lr"]],
      ["ul", null, ["li", null, "one"], ["li", null, ["em", null, "two"]]],
    ]);
  });

  it("keeps HTML as text and links only to http(s)", () => {
    const tree = render('<script>alert(1)</script> <img src=x onerror="alert(2)">\n[ok](https://example.com) [bad](javascript:alert(3))');
    expect(tree).toEqual([
      "div",
      null,
      [
        "p",
        null,
        '<script>alert(1)</script> <img src=x onerror="alert(2)">',
        ["br", null],
        ["a", "https://example.com", "ok"],
        " [bad](javascript:alert(3))",
      ],
    ]);
  });

  it("keeps a fenced block verbatim", () => {
    expect(render("```\n**not bold** <b>\n```")).toEqual(["div", null, ["pre", null, "**not bold** <b>"]]);
  });
});
