/**
 * How old the figures the gauge's popup and the VRAM panel show are, where
 * they are not live (issue 40: between cells an idle kernel's agent sends
 * nothing): the device's figures come from the server's NVML reading, the
 * kernel's own from its last report; where the server cannot read the
 * kernel's GPU, everything is as old as that report. Pure.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { formatIdle } from './analysis/format';
import type { GpuKernelModel } from './model';
import { isComposed } from './server-devices';

/** How old figures may be before the gauge and the panel say their age (ms). */
export const FIGURES_AGE_SHOWN_MS = 10_000;

/**
 * How old the figures shown are, where they are not live (issue 40: an idle
 * kernel's agent sends nothing): between cells the device's figures come
 * from the server and this kernel's own from its last report (sent when
 * they change); where the server cannot read the kernel's GPU, every figure
 * is as old as the kernel's last report. Nothing while a cell runs.
 *
 * @param now - ms since the epoch.
 */
export function ageNotes(
  model: GpuKernelModel,
  now: number,
  trans: TranslationBundle
): string[] {
  const latest = model.latestSample;
  if (!latest || latest.busy) {
    return [];
  }
  const ago = (t: number) => formatIdle(Math.max(0, now / 1000 - t));
  if (isComposed(latest)) {
    return [
      trans.__(
        'Device figures read by the server %1 ago; this kernel’s own as of its last report, %2 ago (an idle kernel reports only a change).',
        ago(latest.t),
        ago(latest.ownT)
      )
    ];
  }
  if (
    !model.serverSeesDevices &&
    (model.hello?.devices.length ?? 0) > 0 &&
    now - latest.t * 1000 >= FIGURES_AGE_SHOWN_MS
  ) {
    return [
      trans.__(
        'Figures as of %1 ago: an idle kernel reports only a change of its own, and this server cannot read its GPU. Opening this view asked the kernel again.',
        ago(latest.t)
      )
    ];
  }
  return [];
}
