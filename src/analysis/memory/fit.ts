/** Least-squares line fitting (the leak trend's arithmetic). */

/** A least-squares line `y = slope * x + intercept` and its R². */
export interface ILinearFit {
  slope: number;
  intercept: number;
  /** Coefficient of determination, 0–1 (0 for a constant series). */
  r2: number;
}

/**
 * Least-squares line through points.
 *
 * @param xs - abscissae (same length as `ys`, at least 2 distinct values).
 * @param ys - ordinates.
 */
export function fitLine(
  xs: ReadonlyArray<number>,
  ys: ReadonlyArray<number>
): ILinearFit {
  const n = ys.length;
  let sx = 0;
  let sy = 0;
  for (let i = 0; i < n; i++) {
    sx += xs[i];
    sy += ys[i];
  }
  const mx = sx / n;
  const my = sy / n;
  let sxx = 0;
  let sxy = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    const dx = xs[i] - mx;
    const dy = ys[i] - my;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  if (sxx === 0) {
    return { slope: 0, intercept: my, r2: 0 };
  }
  const slope = sxy / sxx;
  const r2 = syy === 0 ? 0 : Math.min(1, (sxy * sxy) / (sxx * syy));
  return { slope, intercept: my - slope * mx, r2 };
}
