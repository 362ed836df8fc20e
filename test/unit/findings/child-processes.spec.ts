import {
  childProcessesRule,
  workerNames,
  WORKERS_WARN_RSS
} from '../../../src/analysis/findings/child-processes';
import { fixCommand, fixLabel } from '../../../src/analysis/findings';
import type {
  IChildProcess,
  IChildren,
  IWorkerHolder
} from '../../../src/protocol';
import { CommandIDs } from '../../../src/tokens';
import { c01Inventory } from '../fixtures';
import { facts, MiB, trans } from './helpers';

function worker(pid: number, rss = 400 * MiB, cuda = false): IChildProcess {
  return {
    pid,
    ppid: 100,
    name: 'pt_data_worker',
    cmdline: 'python -m ipykernel_launcher -f kernel.json',
    rss,
    cuda,
    cudaSource: 'fd'
  };
}

function holder(
  name: string,
  pids: number[],
  extra: Partial<IWorkerHolder> = {}
): IWorkerHolder {
  return {
    kind: 'variable',
    name,
    path: name,
    className: 'DataLoader',
    persistent: true,
    pids,
    ...extra
  };
}

function withChildren(children: Partial<IChildren>) {
  return facts({
    ...c01Inventory(),
    children: {
      visible: true,
      source: 'proc',
      reason: null,
      truncated: false,
      processes: [],
      holders: [],
      ...children
    }
  });
}

describe('child-processes', () => {
  it('workers a persistent DataLoader keeps: info, bytes = their RSS, Drop train_loader…', () => {
    const [finding] = childProcessesRule(
      withChildren({
        processes: [worker(201), worker(202), worker(203)],
        holders: [holder('train_loader', [201, 202, 203])]
      })
    );
    expect(finding).toMatchObject({
      kind: 'child-processes',
      id: 'child-processes:201,202,203',
      severity: 'info',
      subject: 'train_loader',
      bytes: { cpu: 1200 * MiB },
      fix: {
        kind: 'drop-workers',
        names: ['train_loader'],
        pids: [201, 202, 203]
      }
    });
    expect(finding.explain(trans)).toBe(
      '3 DataLoader workers (1.2 GiB RSS, 0 with a CUDA context) kept alive by train_loader (persistent_workers=True).'
    );
    expect(finding.evidence[0]).toBe('train_loader (DataLoader)');
    expect(finding.evidence[1]).toBe('pid 201 pt_data_worker: RSS 400.0 MiB');
    expect(fixLabel(finding.fix, trans)).toBe('Drop train_loader…');
    expect(fixCommand(finding.fix, 'k1')).toEqual({
      id: CommandIDs.dropWorkers,
      args: { kernelId: 'k1', names: ['train_loader'] }
    });
  });

  it('a warning when a worker holds a CUDA context or their RSS reaches 4 GiB', () => {
    const [cuda] = childProcessesRule(
      withChildren({
        processes: [worker(201, 300 * MiB, true), worker(202)],
        holders: [holder('it', [201, 202], { persistent: false })]
      })
    );
    expect(cuda.severity).toBe('warning');
    expect(cuda.evidence[1]).toBe(
      'pid 201 pt_data_worker: RSS 300.0 MiB, CUDA (fd)'
    );
    expect(cuda.explain(trans)).toBe(
      '2 DataLoader workers (700.0 MiB RSS, 1 with a CUDA context) kept alive by it.'
    );
    const [unknown] = childProcessesRule(
      withChildren({
        processes: [{ ...worker(201), cuda: null }, worker(202)],
        holders: [holder('it', [201, 202], { persistent: false })]
      })
    );
    expect(unknown.severity).toBe('info');
    expect(unknown.explain(trans)).toBe(
      '2 DataLoader workers (800.0 MiB RSS, 0 with a CUDA context, 1 unknown) kept alive by it.'
    );
    const [big] = childProcessesRule(
      withChildren({
        processes: [worker(201, WORKERS_WARN_RSS)],
        holders: [holder('loader', [201])]
      })
    );
    expect(big.severity).toBe('warning');
  });

  it('holders that share workers are one finding; only variables that are the loader are dropped', () => {
    const list = childProcessesRule(
      withChildren({
        processes: [worker(201), worker(202)],
        holders: [
          holder('it', [201, 202], {
            className: '_MultiProcessingDataLoaderIter',
            persistent: false
          }),
          holder('box', [201, 202], {
            path: "box['k']",
            className: '_MultiProcessingDataLoaderIter',
            persistent: false
          }),
          holder('_', [201, 202], { kind: 'output' })
        ]
      })
    );
    expect(list).toHaveLength(1);
    expect(list[0].subject).toBe("it, box['k'], _");
    expect(list[0].fix).toEqual({
      kind: 'drop-workers',
      names: ['it'],
      pids: [201, 202]
    });
  });

  it('no variable is the loader itself: no button', () => {
    const [finding] = childProcessesRule(
      withChildren({
        processes: [worker(201)],
        holders: [holder('runs', [201], { path: 'runs[0]' })]
      })
    );
    expect(finding.fix).toEqual({ kind: 'none' });
    expect(workerNames([holder('x y', [1])])).toEqual([]);
  });

  it('children no name keeps: one info without a fix', () => {
    const list = childProcessesRule(
      withChildren({
        processes: [worker(201), { ...worker(300, 20 * MiB), name: 'python3' }],
        holders: [holder('loader', [201])]
      })
    );
    expect(list.map(f => f.id)).toEqual([
      'child-processes:201',
      'child-processes:other'
    ]);
    const other = list[1];
    expect(other).toMatchObject({
      severity: 'info',
      subject: 'python3',
      bytes: { cpu: 20 * MiB },
      fix: { kind: 'none' }
    });
    expect(other.explain(trans)).toBe(
      '1 other child process of the kernel (20.0 MiB RSS, 0 with a CUDA context): no user variable keeps it; it ends with the kernel.'
    );
  });

  it('children that cannot be seen: the panel says so instead of showing none', () => {
    const reason = 'no /proc and psutil is not installed in the kernel';
    const [unseen] = childProcessesRule(
      withChildren({ visible: false, source: null, reason })
    );
    expect(unseen).toMatchObject({
      id: 'child-processes:unseen',
      severity: 'info',
      bytes: {},
      fix: { kind: 'none' }
    });
    expect(unseen.explain(trans)).toBe(
      'The kernel’s child processes (DataLoader workers) cannot be seen here: no /proc and psutil is not installed in the kernel. Install psutil in the kernel’s environment to see them.'
    );
    // the holders are still known from Python: their workers are named, memory unknown
    const [held] = childProcessesRule(
      withChildren({
        visible: false,
        source: null,
        reason,
        holders: [holder('loader', [201, 202])]
      })
    );
    expect(held.bytes).toEqual({});
    expect(held.fix.kind).toBe('drop-workers');
    expect(held.explain(trans)).toBe(
      `2 DataLoader workers kept alive by loader (persistent_workers=True); their memory cannot be seen from this kernel (${reason}).`
    );
  });

  it('workers a previous kernel left running: a warning with their pids, no button', () => {
    const [finding] = childProcessesRule(
      withChildren({
        orphans: [
          { ...worker(502, 300 * MiB), ppid: 1 },
          { ...worker(501, 300 * MiB, true), ppid: 1 }
        ]
      })
    );
    expect(finding).toMatchObject({
      id: 'child-processes:orphans:501,502',
      severity: 'warning',
      subject: 'pid 501, 502',
      bytes: { cpu: 600 * MiB },
      fix: { kind: 'none' }
    });
    expect(finding.explain(trans)).toBe(
      '2 DataLoader workers of a previous kernel still run (600.0 MiB RSS, 1 with a CUDA context): end them with kill 501 502.'
    );
  });

  it('nothing without children or without the fact', () => {
    expect(childProcessesRule(withChildren({}))).toEqual([]);
    expect(childProcessesRule(facts(c01Inventory()))).toEqual([]);
    expect(childProcessesRule(facts(null))).toEqual([]);
  });
});
