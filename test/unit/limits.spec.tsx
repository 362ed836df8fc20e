/**
 * Issue 16: what an old environment lacks, the agent degrades from and says
 * once, as `limits` in `hello` and every `inventory` (docs/protocol.md); the
 * browser parses them (optional: older agents send none), keeps them in the
 * kernel model each once, and the gauge's details popup says each once.
 */
import { zhBundle } from './zh-bundle';
import { nullTranslator, TranslationBundle } from '@jupyterlab/translation';
import { render, screen, within } from '@testing-library/react';
import React from 'react';
import { DOMAIN } from '../../src/i18n';
import { GpuKernelModel } from '../../src/model';
import { ILimit, parseKernelMessage } from '../../src/protocol';
import { GaugeDetails } from '../../src/statusbar/popup';
import {
  gaugeState,
  limitLine,
  namespaceLine
} from '../../src/statusbar/state';
import { DEFAULT_SETTINGS } from '../../src/tokens';
import { c01Inventory, gpuSample, h200Hello } from './fixtures';

/** English (no catalogue). */
const trans = nullTranslator.load(DOMAIN);
const GiB = 2 ** 30;

const ipython: ILimit = {
  area: 'holders',
  library: 'IPython',
  version: '7.34.0'
};
const torch: ILimit = { area: 'models', library: 'torch', version: '1.13.1' };
const ultralytics: ILimit = {
  area: 'owners',
  library: 'Ultralytics',
  version: '8.0.20'
};

/** The zh_CN catalogue as JupyterLab's TranslationManager loads it. */
function chinese(): TranslationBundle {
  return zhBundle() as unknown as TranslationBundle;
}

/** A running kernel on an H200: hello (with `helloLimits`), a sample, an inventory. */
function kernel(
  helloLimits: ILimit[] | undefined,
  inventoryLimits: ILimit[] | undefined
): GpuKernelModel {
  const model = new GpuKernelModel({ kernelId: 'k-limits' });
  const hello = h200Hello();
  model.apply(
    helloLimits === undefined ? hello : { ...hello, limits: helloLimits }
  );
  model.apply(gpuSample(20 * GiB, 141 * GiB));
  const inventory = c01Inventory();
  model.apply(
    inventoryLimits === undefined
      ? inventory
      : { ...inventory, limits: inventoryLimits }
  );
  return model;
}

describe('limits in the protocol (issue 16)', () => {
  it('accepts hello and inventory with limits, and without them (an older agent)', () => {
    const hello = parseKernelMessage({ ...h200Hello(), limits: [ipython] });
    expect(hello.ok && hello.message.type === 'hello').toBe(true);
    expect(
      hello.ok && hello.message.type === 'hello' && hello.message.limits
    ).toEqual([ipython]);
    const inventory = parseKernelMessage({
      ...c01Inventory(),
      limits: [ipython, torch, ultralytics]
    });
    expect(
      inventory.ok &&
        inventory.message.type === 'inventory' &&
        inventory.message.limits
    ).toEqual([ipython, torch, ultralytics]);
    const older = parseKernelMessage(h200Hello());
    expect(older.ok && older.message.type === 'hello').toBe(true);
    expect(older.ok && 'limits' in older.message).toBe(false);
    expect(parseKernelMessage(c01Inventory()).ok).toBe(true);
    expect(parseKernelMessage({ ...c01Inventory(), limits: [] }).ok).toBe(true);
  });

  it('rejects a limit of an unknown area or without its version', () => {
    const bad = (limit: unknown) =>
      parseKernelMessage({ ...c01Inventory(), limits: [limit] }).ok;
    expect(bad({ ...torch, area: 'cells' })).toBe(false);
    expect(bad({ area: 'models', library: 'torch' })).toBe(false);
    expect(bad({ ...torch, version: 1 })).toBe(false);
  });
});

describe('GpuKernelModel.limits', () => {
  it('joins the hello’s and the latest inventory’s, each once', () => {
    const model = kernel([ipython], [ipython, torch]);
    expect(model.limits).toEqual([ipython, torch]);
    model.apply({ ...c01Inventory(), limits: [ipython, torch, torch] });
    expect(model.limits).toEqual([ipython, torch]);
  });

  it('is empty for an agent that sends none, and after a restart', () => {
    expect(kernel(undefined, undefined).limits).toEqual([]);
    const model = kernel([ipython], [torch]);
    model.resetKernelState();
    expect(model.limits).toEqual([]);
  });
});

describe('the gauge says each limit once, in its details', () => {
  it('has one line per limit, in English', () => {
    expect(limitLine(ipython, trans)).toBe('Holders limited: IPython 7.34.0');
    expect(limitLine(torch, trans)).toBe(
      'Models found by a heap scan: torch 1.13.1'
    );
    expect(limitLine(ultralytics, trans)).toBe(
      'Trainer owners limited: Ultralytics 8.0.20'
    );
    const model = kernel([ipython], [ipython, torch, ultralytics]);
    const state = gaugeState(model, DEFAULT_SETTINGS, trans);
    expect(state.details.limits).toEqual([
      'Holders limited: IPython 7.34.0',
      'Models found by a heap scan: torch 1.13.1',
      'Trainer owners limited: Ultralytics 8.0.20'
    ]);
    // the summary and errors do not repeat them
    expect(state.details.summary.join('\n')).not.toMatch(/limited|heap scan/);
    expect(state.details.errors).toEqual([]);
    expect(
      state.tooltip.filter(line => line === 'Holders limited: IPython 7.34.0')
    ).toHaveLength(1);
  });

  it('renders them once each in the popup, under their own heading', () => {
    const model = kernel([ipython], [ipython, torch]);
    const state = gaugeState(model, DEFAULT_SETTINGS, trans);
    const { container } = render(
      <GaugeDetails state={state} trans={trans} actions={{ canClean: false }} />
    );
    const section = screen.getByRole('region', {
      name: 'Limits of this environment'
    });
    expect(section.getAttribute('data-section')).toBe('limits');
    const items = within(section)
      .getAllByRole('listitem')
      .map(li => li.textContent);
    expect(items).toEqual([
      'Holders limited: IPython 7.34.0',
      'Models found by a heap scan: torch 1.13.1'
    ]);
    const text = container.textContent ?? '';
    expect(text.split('Holders limited: IPython 7.34.0')).toHaveLength(2);
    expect(text.split('Models found by a heap scan')).toHaveLength(2);
  });

  it('says how a large namespace is read (issue 31), only where the agent sends it', () => {
    const model = kernel(undefined, undefined);
    expect(gaugeState(model, DEFAULT_SETTINGS, trans).details.limits).toEqual(
      []
    );
    const namespace = { names: 100_046, read: 1_070, roots: 5, cycle: 391 };
    const parsed = parseKernelMessage({ ...c01Inventory(), namespace });
    expect(
      parsed.ok && parsed.message.type === 'inventory' && parsed.message
    ).toMatchObject({ namespace });
    expect(
      parseKernelMessage({
        ...c01Inventory(),
        namespace: { ...namespace, read: -1 }
      }).ok
    ).toBe(false);
    model.apply({ ...c01Inventory(), namespace });
    const line = namespaceLine(namespace, trans);
    expect(line).toBe(
      `Large namespace: ${(100_046).toLocaleString()} names, ${(1_070).toLocaleString()} read after the last cell; a name the cells do not mention is read again within 391 cells`
    );
    expect(gaugeState(model, DEFAULT_SETTINGS, trans).details.limits).toEqual([
      line
    ]);
    expect(namespaceLine(namespace, chinese())).not.toBe(line);
  });

  it('has no limits section when the agent sends none', () => {
    const state = gaugeState(
      kernel(undefined, undefined),
      DEFAULT_SETTINGS,
      trans
    );
    expect(state.details.limits).toEqual([]);
    render(
      <GaugeDetails state={state} trans={trans} actions={{ canClean: false }} />
    );
    expect(
      screen.queryByRole('region', { name: 'Limits of this environment' })
    ).toBeNull();
  });

  it('is localised (zh_CN)', () => {
    const zh = chinese();
    const model = kernel([ipython], [ipython, torch, ultralytics]);
    const state = gaugeState(model, DEFAULT_SETTINGS, zh);
    expect(state.details.limits).toEqual([
      '持有者受限：IPython 7.34.0',
      '模型由堆扫描查找：torch 1.13.1',
      'trainer 所有者受限：Ultralytics 8.0.20'
    ]);
    render(
      <GaugeDetails state={state} trans={zh} actions={{ canClean: false }} />
    );
    const section = screen.getByRole('region', { name: '此环境的限制' });
    expect(within(section).getAllByRole('listitem')).toHaveLength(3);
  });

  it('says them also when no GPU can be measured', () => {
    const model = new GpuKernelModel({ kernelId: 'k-cpu' });
    model.apply({
      ...h200Hello(),
      nvml: false,
      nvmlError: 'NVML Shared Library Not Found',
      devices: [],
      limits: [torch]
    });
    model.apply({ ...gpuSample(0, 0), devices: [] });
    model.apply({ ...c01Inventory(), limits: [torch] });
    const state = gaugeState(model, DEFAULT_SETTINGS, trans);
    expect(state.kind).toBe('no-gpu');
    expect(state.details.limits).toEqual([
      'Models found by a heap scan: torch 1.13.1'
    ]);
  });
});
