/**
 * A small markdown subset rendered as Preact elements, never as HTML: headings, paragraphs,
 * lists, code blocks, inline code, bold, italic and http(s) links. Whatever a note holds —
 * `<script>`, `<img onerror>`, `javascript:` links — is shown as text, because nothing here
 * ever reaches innerHTML.
 */
import type { ComponentChildren, VNode } from "preact";

const INLINE = /(`[^`]+`|\*\*[^*]+\*\*|\*[^*\s][^*]*\*|_[^_\s][^_]*_|\[[^\]]+\]\([^)\s]+\))/;

/** Inline spans of one line of text. */
export function inline(text: string): ComponentChildren[] {
  const out: ComponentChildren[] = [];
  for (const part of text.split(INLINE)) {
    if (!part) continue;
    if (part.startsWith("`") && part.endsWith("`") && part.length > 2) out.push(<code>{part.slice(1, -1)}</code>);
    else if (part.startsWith("**") && part.endsWith("**") && part.length > 4) out.push(<strong>{inline(part.slice(2, -2))}</strong>);
    else if (/^[*_].+[*_]$/.test(part) && part[0] === part[part.length - 1]) out.push(<em>{inline(part.slice(1, -1))}</em>);
    else if (part.startsWith("[")) out.push(link(part));
    else out.push(part);
  }
  return out;
}

function link(part: string): ComponentChildren {
  const match = /^\[([^\]]+)\]\(([^)\s]+)\)$/.exec(part);
  if (!match) return part;
  const [, label = "", href = ""] = match;
  // only web links: a javascript: or data: URL stays text
  if (!/^https?:\/\//i.test(href)) return part;
  return (
    <a href={href} target="_blank" rel="noopener noreferrer nofollow">
      {label}
    </a>
  );
}

/** A markdown note as elements (blocks separated by blank lines, fenced code kept verbatim). */
export function Markdown({ text, testId }: { text: string; testId?: string }): VNode {
  const blocks: ComponentChildren[] = [];
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const line = (k: number): string => lines[k] ?? "";
  const isItem = (k: number) => /^\s*[-*]\s+/.test(line(k));
  let i = 0;
  while (i < lines.length) {
    const current = line(i);
    if (current.startsWith("```")) {
      const code: string[] = [];
      for (i += 1; i < lines.length && !line(i).startsWith("```"); i += 1) code.push(line(i));
      blocks.push(<pre tabIndex={0}>{code.join("\n")}</pre>);
      i += 1;
      continue;
    }
    const heading = /^(#{1,3})\s+(.*)$/.exec(current);
    if (heading) {
      const level = (heading[1] ?? "#").length;
      const content = inline(heading[2] ?? "");
      blocks.push(level === 1 ? <h3>{content}</h3> : level === 2 ? <h4>{content}</h4> : <h5>{content}</h5>);
      i += 1;
      continue;
    }
    if (isItem(i)) {
      const items: ComponentChildren[] = [];
      for (; i < lines.length && isItem(i); i += 1) items.push(<li>{inline(line(i).replace(/^\s*[-*]\s+/, ""))}</li>);
      blocks.push(<ul>{items}</ul>);
      continue;
    }
    if (!current.trim()) {
      i += 1;
      continue;
    }
    const para: string[] = [];
    for (; i < lines.length && line(i).trim() && !/^(```|#{1,3}\s|\s*[-*]\s)/.test(line(i)); i += 1) para.push(line(i));
    blocks.push(<p>{para.flatMap((l, k) => (k ? [<br />, ...inline(l)] : inline(l)))}</p>);
  }
  return (
    <div class="markdown" data-testid={testId}>
      {blocks}
    </div>
  );
}
