/**
 * Series colours that stay distinct for 20 runs (Compare, the run table's charts). The first
 * eight are the theme's --series-1..8; the other twelve were picked greedily to keep the
 * smallest CIELAB distance between any two of the twenty large (tests/palette.test.ts), with
 * lightness bounded so each reads on its theme's background.
 */
export const PALETTE = {
  light: [
    "#2f6fdb", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#0b7285", "#e67700", "#495057",
    "#1313ec", "#cea67e", "#a5a50d", "#ec13ec", "#d590c0", "#0fbd0f", "#7e391b", "#0fbdab",
    "#71b2f4", "#5c5c23", "#f47e71", "#f25ac4",
  ],
  dark: [
    "#5b9bff", "#ff8c42", "#51cf66", "#cc5de8", "#f06595", "#3bc9db", "#ffd43b", "#adb5bd",
    "#948b38", "#abec13", "#f9b8f9", "#ccedab", "#c77d6b", "#38946f", "#13ecc1", "#13ec29",
    "#78a50d", "#468bb9", "#f04254", "#f7cca1",
  ],
} as const;

/** The colour of the i-th run on a theme (it repeats only after 20). */
export function runColor(i: number, theme: "light" | "dark"): string {
  const colours = PALETTE[theme];
  return colours[((i % colours.length) + colours.length) % colours.length]!;
}

/** CIELAB (D65) of a #rrggbb colour. */
export function lab(hex: string): [number, number, number] {
  const channel = (i: number) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  const [r, g, b] = [channel(1), channel(3), channel(5)];
  const x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047;
  const y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  const z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
  const f = (t: number) => (t > 0.008856 ? Math.cbrt(t) : 7.787 * t + 16 / 116);
  return [116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))];
}

/** The CIE76 colour difference of two colours (about 2.3: just noticeable). */
export function deltaE(a: string, b: string): number {
  const [p, q] = [lab(a), lab(b)];
  return Math.hypot(p[0] - q[0], p[1] - q[1], p[2] - q[2]);
}
