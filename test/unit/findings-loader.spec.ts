/**
 * The findings' rules are a lazy chunk (src/analysis/findings/rules-loader.ts):
 * the gauge's state before they load, and the gauge rendering again when
 * they are there. Each test runs in a module registry of its own, so the
 * rules are not yet loaded there (test/unit/preload.ts loads them for the
 * other specs).
 */
import { nullTranslator } from '@jupyterlab/translation';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const GiB = 2 ** 30;

type Modules = {
  loader: typeof import('../../src/analysis/findings/rules-loader');
  state: typeof import('../../src/statusbar/state');
  gauge: typeof import('../../src/statusbar/gauge-model');
  model: typeof import('../../src/model');
  fixtures: typeof import('./fixtures');
  tokens: typeof import('../../src/tokens');
};

async function fresh(): Promise<Modules> {
  let modules: Modules | null = null;
  await jest.isolateModulesAsync(async () => {
    modules = {
      loader: await import('../../src/analysis/findings/rules-loader'),
      state: await import('../../src/statusbar/state'),
      gauge: await import('../../src/statusbar/gauge-model'),
      model: await import('../../src/model'),
      fixtures: await import('./fixtures'),
      tokens: await import('../../src/tokens')
    };
  });
  return modules!;
}

function kernelWithFindings(m: Modules) {
  const model = new m.model.GpuKernelModel({ kernelId: 'k1' });
  model.apply(m.fixtures.h200Hello());
  model.apply(m.fixtures.gpuSample(120 * GiB, 141 * GiB));
  // a stale YOLO (12 MiB of RAM) and the CUDA context: two infos on the one scale
  model.apply(m.fixtures.c01Inventory());
  return model;
}

const findingsLines = (tooltip: string[]) =>
  tooltip.filter(line => line.startsWith('Findings:'));

describe('the findings chunk', () => {
  it('is not loaded at start; the gauge state then has no findings line, and has it once loaded', async () => {
    const m = await fresh();
    expect(m.loader.loadedFindings()).toBeNull();
    const model = kernelWithFindings(m);
    const before = m.state.gaugeState(model, m.tokens.DEFAULT_SETTINGS, trans);
    expect(before.text).toBe('VRAM 120.0 GiB / 141.0 GiB');
    expect(findingsLines(before.tooltip)).toEqual([]);
    await m.loader.loadFindings();
    const after = m.state.gaugeState(model, m.tokens.DEFAULT_SETTINGS, trans);
    expect(findingsLines(after.tooltip)).toEqual(['Findings: 2 infos']);
  });

  it('is asked for by the gauge with its first kernel, which renders again when it is there', async () => {
    const m = await fresh();
    const kernel = kernelWithFindings(m);
    expect(m.loader.loadedFindings()).toBeNull();
    const rendered: boolean[] = [];
    const gaugeModel = new m.gauge.GaugeModel(
      new m.fixtures.OneModelMonitor(kernel)
    );
    // nothing here calls loadFindings: the gauge model did
    await new Promise<void>(resolve => {
      gaugeModel.stateChanged.connect(() => {
        rendered.push(m.loader.loadedFindings() !== null);
        if (m.loader.loadedFindings()) {
          resolve();
        }
      });
    });
    expect(rendered).toEqual([true]);
    const state = m.state.gaugeState(kernel, m.tokens.DEFAULT_SETTINGS, trans);
    expect(findingsLines(state.tooltip)).toHaveLength(1);
    gaugeModel.dispose();
  });

  it('is tried again at the next call after a failed load', async () => {
    const index = '../../src/analysis/findings/index';
    let m: Modules | null = null;
    let failed: unknown = null;
    await jest.isolateModulesAsync(async () => {
      jest.doMock(index, () => {
        throw new Error('chunk failed to load');
      });
      const loader = await import('../../src/analysis/findings/rules-loader');
      const first = loader.loadFindings();
      // asked twice while it loads: the same attempt
      expect(loader.loadFindings()).toBe(first);
      await first.catch(reason => (failed = reason));
      expect(loader.loadedFindings()).toBeNull();
      jest.dontMock(index);
      jest.resetModules();
      m = { loader } as Modules;
    });
    expect(String(failed)).toContain('chunk failed to load');
    const module = await m!.loader.loadFindings();
    expect(typeof module.findings).toBe('function');
    expect(m!.loader.loadedFindings()).toBe(module);
  });
});
