/** A time-series line chart (uPlot), redrawn when its data changes and resized with its container. */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/** Colour-blind-friendly (Okabe–Ito), each at least 3:1 against the white chart background. */
const PALETTE = ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#8a6d00', '#56768a', '#444444'];
const HEIGHT = 260;

export interface Series {
  label: string;
  values: number[];
}

interface TimeChartProps {
  /** Accessible name of the chart; the numbers are also in the table beside it. */
  label: string;
  /** Bucket starts, Unix seconds. */
  xs: number[];
  series: Series[];
}

export function TimeChart({ label, xs, series }: TimeChartProps) {
  const container = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = container.current;
    if (!element) return;
    const options: uPlot.Options = {
      width: Math.max(element.clientWidth, 320),
      height: HEIGHT,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      scales: { x: { time: true } },
      series: [
        { label: 'UTC' },
        ...series.map((s, i) => ({
          label: s.label,
          stroke: PALETTE[i % PALETTE.length],
          width: 2,
          points: { show: xs.length <= 48 },
        })),
      ],
      axes: [{}, { size: 60 }],
    };
    const plot = new uPlot(options, [xs, ...series.map((s) => s.values)], element);
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(element.clientWidth, 320), height: HEIGHT }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [xs, series]);
  return <div class="chart" ref={container} role="img" aria-label={label} />;
}
