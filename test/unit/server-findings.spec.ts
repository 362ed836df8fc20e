/**
 * Issue 25: each kernel's findings, as this page computes them, reported to
 * the server extension for its Prometheus metrics (src/server-findings.ts).
 * The server is a fake `fetch` (its side: test/server/test_metrics.py).
 */
import { readFileSync, writeFileSync } from 'fs';
import { join } from 'path';
import { ServerConnection } from '@jupyterlab/services';
import { Signal } from '@lumino/signaling';
import { findings, factsOf } from '../../src/analysis/findings';
import { loadFindings } from '../../src/analysis/findings/rules-loader';
import { GpuKernelModel } from '../../src/model';
import {
  FindingsReporter,
  findingsReport,
  findingsReportUrl
} from '../../src/server-findings';
import type { IGpuMonitor } from '../../src/tokens';
import { c01Inventory, c08Inventory, gpuSample, h200Hello } from './fixtures';

const GiB = 2 ** 30;

/** Server settings whose fetch answers `status`; every request is kept. */
function server(status: () => number) {
  const requests: Array<{ url: string; method: string; body: unknown }> = [];
  const settings = ServerConnection.makeSettings({
    baseUrl: 'http://localhost:8888/user/alice/',
    Request: class {
      headers = {
        append: () => undefined,
        has: () => true,
        set: () => undefined
      };
      constructor(
        readonly url: string,
        readonly init: { method: string; body: string }
      ) {}
    } as any,
    fetch: ((request: {
      url: string;
      init: { method: string; body: string };
    }) => {
      requests.push({
        url: request.url.split('?')[0], // without makeRequest's cache-busting query
        method: request.init.method,
        body: JSON.parse(request.init.body)
      });
      const code = status();
      return Promise.resolve({ status: code, ok: code < 300 });
    }) as any
  });
  return { settings, requests };
}

function monitorOf(...models: GpuKernelModel[]): IGpuMonitor {
  return {
    models,
    modelAdded: new Signal<IGpuMonitor, GpuKernelModel>({} as IGpuMonitor)
  } as unknown as IGpuMonitor;
}

function kernel(id: string): GpuKernelModel {
  const model = new GpuKernelModel({ kernelId: id });
  model.apply(h200Hello());
  model.apply(gpuSample(120 * GiB, 141 * GiB));
  return model;
}

/** Let the reporter's timer and its awaits run. */
async function settle(): Promise<void> {
  jest.advanceTimersByTime(1000);
  for (let i = 0; i < 10; i++) {
    await Promise.resolve();
  }
  await loadFindings();
  for (let i = 0; i < 10; i++) {
    await Promise.resolve();
  }
}

describe('findingsReport', () => {
  it('says each finding’s kind, severity and bytes, and the stale models’ bytes', () => {
    const model = kernel('k1');
    model.apply(c01Inventory());
    const list = findings(factsOf(model));
    const report = findingsReport(model.inventory!, list);
    expect(report.findings).toEqual(
      list.map(f => ({
        kind: f.kind,
        severity: f.severity,
        bytes: Object.values(f.bytes).reduce((a, b) => a + b, 0)
      }))
    );
    expect(report.findings.map(f => f.kind)).toContain('stale-model');
    const stale = model.inventory!.models.filter(m => m.stale);
    expect(stale.length).toBeGreaterThan(0);
    expect(report.staleBytes).toBe(
      stale.reduce(
        (t, m) => t + Object.values(m.bytes).reduce((a, b) => a + b, 0),
        0
      )
    );
  });

  it('is the report the server’s schema accepts (test/fixtures/findings_reports.json, checked by test/server/test_metrics.py)', () => {
    const reports = [c01Inventory(), c08Inventory()].map(inventory => {
      const model = kernel('k1');
      model.apply(inventory);
      return findingsReport(model.inventory!, findings(factsOf(model)));
    });
    const text = JSON.stringify(reports, null, 1) + '\n';
    const path = join(__dirname, '..', 'fixtures', 'findings_reports.json');
    if (process.env.UPDATE_FIXTURES) {
      writeFileSync(path, text);
    }
    expect(text).toBe(readFileSync(path, 'utf8'));
  });

  it('encodes the kernel id into the URL', () => {
    expect(findingsReportUrl('http://h/base/', 'a b')).toBe(
      'http://h/base/gpu-hygiene/kernels/a%20b/findings'
    );
  });
});

describe('FindingsReporter', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('puts one report a second after a burst of inventories, and none while it is unchanged', async () => {
    const { settings, requests } = server(() => 204);
    const model = kernel('k1');
    const reporter = new FindingsReporter({
      monitor: monitorOf(model),
      serverSettings: settings
    });
    model.apply(c01Inventory());
    model.apply(c01Inventory());
    await settle();
    expect(requests).toHaveLength(1);
    expect(requests[0].url).toBe(
      'http://localhost:8888/user/alice/gpu-hygiene/kernels/k1/findings'
    );
    expect(requests[0].method).toBe('PUT');
    expect(requests[0].body).toEqual(
      findingsReport(model.inventory!, findings(factsOf(model)))
    );
    model.apply(c01Inventory()); // the same findings: nothing new to say
    await settle();
    expect(requests).toHaveLength(1);
    model.apply(c08Inventory()); // other findings: reported
    await settle();
    expect(requests).toHaveLength(2);
    expect(
      (requests[1].body as { findings: Array<{ kind: string }> }).findings.map(
        f => f.kind
      )
    ).toContain('graph-holder');
    reporter.dispose();
    model.apply(c01Inventory());
    await settle();
    expect(requests).toHaveLength(2);
  });

  it('asks no more for a kernel the server does not know (404); a failure is tried again', async () => {
    let status = 500;
    const { settings, requests } = server(() => status);
    const model = kernel('k1');
    new FindingsReporter({
      monitor: monitorOf(model),
      serverSettings: settings
    });
    model.apply(c01Inventory());
    await settle();
    expect(requests).toHaveLength(1);
    model.apply(c01Inventory()); // not sent successfully yet: tried again
    await settle();
    expect(requests).toHaveLength(2);
    status = 404;
    model.apply(c08Inventory());
    await settle();
    expect(requests).toHaveLength(3);
    model.apply(c01Inventory());
    await settle();
    expect(requests).toHaveLength(3);
  });

  it('asks no more where the user may not write to the kernels (403)', async () => {
    const { settings, requests } = server(() => 403);
    const model = kernel('k1');
    new FindingsReporter({
      monitor: monitorOf(model),
      serverSettings: settings
    });
    model.apply(c01Inventory());
    await settle();
    model.apply(c08Inventory());
    await settle();
    expect(requests).toHaveLength(1);
  });

  it('reports a kernel whose inventory came before the reporter’s chunk loaded', async () => {
    const { settings, requests } = server(() => 204);
    const model = kernel('k3');
    model.apply(c01Inventory());
    new FindingsReporter({
      monitor: monitorOf(model),
      serverSettings: settings
    });
    await settle();
    expect(requests.map(r => r.url)).toEqual([
      'http://localhost:8888/user/alice/gpu-hygiene/kernels/k3/findings'
    ]);
  });

  it('follows the kernels the monitor adds later', async () => {
    const { settings, requests } = server(() => 204);
    const monitor = monitorOf();
    new FindingsReporter({ monitor, serverSettings: settings });
    const model = kernel('k2');
    (monitor.modelAdded as Signal<IGpuMonitor, GpuKernelModel>).emit(model);
    model.apply(c01Inventory());
    await settle();
    expect(requests.map(r => r.url)).toEqual([
      'http://localhost:8888/user/alice/gpu-hygiene/kernels/k2/findings'
    ]);
  });
});
