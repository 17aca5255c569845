// The VM page's chart as inline SVG: the idle clock over the last hours with
// the idle timeout as a dashed line, activity as green ticks along the bottom,
// pending stops shaded. Pure: points in, markup out.
import { formatDuration } from "@ws/protocol";
import type { ChartPoint } from "../outreach/history.js";

const WIDTH = 720;
const HEIGHT = 180;
const PAD = { left: 48, right: 12, top: 12, bottom: 34 };

export function renderChart(
  points: ChartPoint[],
  options: { nowMs: number; spanMs: number; idleTimeoutSeconds: number },
): string {
  const { nowMs, spanMs, idleTimeoutSeconds } = options;
  const startMs = nowMs - spanMs;
  const innerW = WIDTH - PAD.left - PAD.right;
  const innerH = HEIGHT - PAD.top - PAD.bottom;
  const known = points.filter((p) => Number.isFinite(p.idleSeconds));
  const maxIdle = Math.max(idleTimeoutSeconds * 1.25, ...known.map((p) => p.idleSeconds), 60);
  const x = (ms: number) => PAD.left + ((ms - startMs) / spanMs) * innerW;
  const y = (seconds: number) => PAD.top + innerH - (Math.min(seconds, maxIdle) / maxIdle) * innerH;
  const f = (n: number) => n.toFixed(1);

  const line = known.map((p, i) => `${i === 0 ? "M" : "L"}${f(x(p.atMs))},${f(y(p.idleSeconds))}`).join(" ");
  const active = points
    .filter((p) => p.activeSignals > 0)
    .map(
      (p) =>
        `<rect class="activity" x="${f(x(p.atMs) - 1.5)}" y="${HEIGHT - PAD.bottom + 3}" width="3" height="8" fill="#2e8b57"></rect>`,
    )
    .join("");
  const pending = points
    .filter((p) => p.state === "StoppingPending" || p.state === "Stopping")
    .map(
      (p) =>
        `<rect x="${f(x(p.atMs) - 2)}" y="${PAD.top}" width="4" height="${innerH}" fill="#f5c542" opacity="0.35"></rect>`,
    )
    .join("");
  const ticks = [0, 0.25, 0.5, 0.75, 1]
    .map((share) => {
      const ms = startMs + share * spanMs;
      return `<text x="${f(x(ms))}" y="${HEIGHT - 6}" text-anchor="middle">${share === 1 ? "now" : `-${formatDuration((nowMs - ms) / 1000)}`}</text>`;
    })
    .join("");
  const timeoutY = y(idleTimeoutSeconds);
  const label = `Idle clock over the last ${formatDuration(spanMs / 1000)}: ${known.length} point(s); activity in ${points.filter((p) => p.activeSignals > 0).length}`;
  return `<svg id="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="100%" style="max-width:${WIDTH}px" role="img" aria-label="${label}">
<title>${label}</title>
<rect x="${PAD.left}" y="${PAD.top}" width="${innerW}" height="${innerH}" fill="#fafafa" stroke="#ddd"></rect>
${pending}
<line x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${f(timeoutY)}" y2="${f(timeoutY)}" stroke="#c0392b" stroke-dasharray="5,4"></line>
<text x="${WIDTH - PAD.right - 4}" y="${f(timeoutY - 4)}" text-anchor="end">idle timeout ${formatDuration(idleTimeoutSeconds)}</text>
<text x="4" y="${PAD.top + 10}">${formatDuration(maxIdle)}</text><text x="4" y="${PAD.top + innerH}">0</text>
${line ? `<path class="idle" d="${line}" fill="none" stroke="#1f5fa8" stroke-width="2"></path>` : `<text x="${WIDTH / 2}" y="${HEIGHT / 2}" text-anchor="middle">no readings yet</text>`}
${active}
${ticks}
</svg>`;
}
