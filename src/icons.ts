/**
 * Icons of the extension (theme-aware through the `jp-icon3` class).
 */
import { LabIcon } from '@jupyterlab/ui-components';
import cleanSvg from '../style/icons/gpu-clean.svg';
import panelSvg from '../style/icons/gpu-panel.svg';

/** A GPU chip with a sweep: the Clean GPU action. */
export const gpuCleanIcon = new LabIcon({
  name: 'jupyterlab-gpu-hygiene:clean',
  svgstr: cleanSvg
});

/** A rising line over an axis: the VRAM panel (time series, who holds VRAM). */
export const gpuPanelIcon = new LabIcon({
  name: 'jupyterlab-gpu-hygiene:panel',
  svgstr: panelSvg
});
