/**
 * Issue 24: "Live CUDA memory by origin" and the findings' origins, from the
 * inventory a real kernel sent with provenance on
 * (`test/fixtures/inventory_provenance.json`, kept current by
 * `test/agent/test_provenance.py`; its recorder is the CPU stand-in of
 * `fake_cuda_history.py`, its cells, roots and agent real). The fixture's
 * roots carry `cpu` bytes: the rules are read as if on cuda:0 (`onCuda`).
 */
import { fireEvent, render } from '@testing-library/react';
import React from 'react';
import { findings } from '../../src/analysis/findings';
import {
  originsOfVariable,
  originsView
} from '../../src/analysis/memory/origins';
import { FindingsTable } from '../../src/panel/tables/finding-table';
import {
  originLabel,
  OriginsSection
} from '../../src/panel/tables/origin-table';
import type { IInventory } from '../../src/protocol';
import { parseKernelMessage } from '../../src/protocol';
import recorded from '../fixtures/inventory_provenance.json';
import { c01Inventory } from './fixtures';
import { facts, MiB, onCuda, trans } from './findings/helpers';

/** The recorded inventory over C01's fields it leaves out. */
function inventory(): IInventory {
  return {
    ...c01Inventory(),
    models: [],
    tensors: [],
    graphs: [],
    owners: [],
    optimizers: [],
    ...(recorded as Partial<IInventory>)
  } as IInventory;
}

describe('the provenance fact', () => {
  it('passes the protocol schema as the agent sent it', () => {
    const parsed = parseKernelMessage({ ...inventory(), type: 'inventory' });
    expect(parsed.ok).toBe(true);
  });

  it('lists the origins of cuda:0 largest first, with the cell links', () => {
    const view = originsView(inventory(), 0);
    expect(view.state).toBe('recording');
    if (view.state !== 'recording') {
      return;
    }
    expect(
      view.rows.map(r => [originLabel(r, trans), r.text, r.bytes / MiB])
    ).toEqual([
      ['cell [5] line 2', 'y = model(batch)', 64],
      [
        'cell [3] line 1',
        'model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).to(DEV)',
        33574912 / MiB
      ],
      ['cell [5] line 3', 'return y.relu()', 16],
      ['cell [7] line 2', 't = torch.ones(1 << 22, device=DEV)', 16],
      ['cell [4] line 1', 'x = torch.randn(512, 1024, device=DEV)', 2]
    ]);
    expect(view.rows[0].via).toEqual({ cell: 6, line: 2 });
    expect(view.since).toBe(3);
    // what the table adds up to, and what it leaves out, are the agent's figures
    const traced = view.rows.reduce((sum, r) => sum + r.bytes, 0);
    expect(traced + view.untracedBytes).toBe(view.liveBytes);
  });

  it('is off without the fact, waits for CUDA, says when torch cannot record', () => {
    const plain = inventory();
    delete plain.provenance;
    expect(originsView(plain, 0)).toEqual({ state: 'off' });
    const waiting = {
      ...inventory(),
      provenance: { recording: false, since: null, reason: 'cuda' as const }
    };
    expect(originsView(waiting, 0)).toEqual({
      state: 'waiting',
      reason: 'cuda'
    });
    const old = {
      ...inventory(),
      provenance: {
        recording: false,
        since: null,
        reason: 'unsupported' as const,
        error: "TypeError: _old() got an unexpected keyword argument 'context'"
      }
    };
    expect(originsView(old, 0)).toEqual({
      state: 'unsupported',
      error: "TypeError: _old() got an unexpected keyword argument 'context'"
    });
  });
});

describe('findings with origins', () => {
  it('the kept error says where its 16 MiB were allocated: cell [7], line 2', () => {
    const list = findings(facts(onCuda(inventory())));
    const kept = list.find(f => f.kind === 'kept-error');
    expect(kept?.origins?.map(o => [o.cell, o.line, o.held])).toEqual([
      [7, 2, 16 * MiB]
    ]);
    const gone: Array<[number, number | null]> = [];
    const { container } = render(
      <FindingsTable
        findings={[kept!]}
        onFix={() => undefined}
        onOrigin={(cell, line) => gone.push([cell, line])}
        trans={trans}
      />
    );
    const origins = container.querySelector('.jp-GpuHygiene-findingOrigins');
    expect(origins?.textContent).toBe(
      'Where its memory was allocated: cell [7] line 2 t = torch.ones(1 << 22, device=DEV) (16.0 MiB)'
    );
    fireEvent.click(
      container.querySelector('[data-action="go-to-origin"]') as Element
    );
    expect(gone).toEqual([[7, 2]]);
  });

  it('says what of an origin another holder keeps too', () => {
    const recorded = inventory();
    const roots = recorded.roots.map(r =>
      r.name === 'err'
        ? { ...r, origins: r.origins!.map(o => ({ ...o, shared: 4 * MiB })) }
        : r
    );
    const list = findings(facts(onCuda({ ...recorded, roots })));
    const kept = list.find(f => f.kind === 'kept-error');
    expect(kept?.origins?.map(o => [o.held, o.shared])).toEqual([
      [16 * MiB, 4 * MiB]
    ]);
    const { container } = render(
      <FindingsTable findings={[kept!]} onFix={() => undefined} trans={trans} />
    );
    expect(
      container.querySelector('.jp-GpuHygiene-findingOrigins')?.textContent
    ).toBe(
      'Where its memory was allocated: cell [7] line 2 t = torch.ones(1 << 22, device=DEV) (16.0 MiB, 4.0 MiB of it also kept by another holder)'
    );
  });

  it('a variable without origins, or an inventory without the fact, gets none', () => {
    const plain = inventory();
    delete plain.provenance;
    expect(
      findings(facts(onCuda(plain))).every(f => f.origins === undefined)
    ).toBe(true);
    expect(originsOfVariable(inventory(), 'warm')).toEqual([]);
    expect(originsOfVariable(inventory(), 'feats').map(o => o.held)).toEqual([
      64 * MiB,
      16 * MiB
    ]);
  });
});

describe('OriginsSection', () => {
  it('says when cells ran the same code, and links by the cell id', () => {
    const recorded = inventory();
    const groups = recorded.provenance!.groups!.map((g, i) =>
      i === 3 ? { ...g, sameCode: [2], cellId: 'cell-abc' } : g
    );
    const view = originsView(
      {
        ...recorded,
        provenance: { ...recorded.provenance!, groups, costMs: 12.34 }
      },
      0
    );
    const gone: Array<[number, number | null, string | null]> = [];
    const { container } = render(
      <OriginsSection
        view={view}
        on={true}
        device="cuda:0"
        onToggle={() => undefined}
        onGo={(cell, line, id) => gone.push([cell, line, id])}
        trans={trans}
      />
    );
    // what reading them cost this kernel, beside the toggle (the agent's measurement)
    expect(container.querySelector('[data-cost="read"]')?.textContent).toBe(
      'reading them took 12.3 ms after the last cell'
    );
    const row = container.querySelectorAll('tr[data-origin]')[3];
    expect(row.textContent).toContain(
      'cell [7] line 2 run by cell [7] line 5 or [2]: same code'
    );
    fireEvent.click(row.querySelector('button') as Element);
    expect(gone).toEqual([[7, 2, 'cell-abc']]);
  });

  it('renders the table, the note and the links; the toggle reports its state', () => {
    const toggled: boolean[] = [];
    const gone: Array<[number, number | null]> = [];
    const { container } = render(
      <OriginsSection
        view={originsView(inventory(), 0)}
        on={true}
        device="cuda:0"
        onToggle={on => toggled.push(on)}
        onGo={(cell, line) => gone.push([cell, line])}
        cost={{ allocUs: 1.5, stepRatio: 1.04, where: 'H100, bench' }}
        trans={trans}
      />
    );
    const rows = Array.from(container.querySelectorAll('tr[data-origin]'));
    expect(rows.map(r => (r as HTMLElement).dataset.origin)).toEqual([
      'cell [5] line 2',
      'cell [3] line 1',
      'cell [5] line 3',
      'cell [7] line 2',
      'cell [4] line 1'
    ]);
    expect(rows[0].textContent).toBe(
      'cell [5] line 2 run by cell [6] line 2y = model(batch)64.0 MiB8'
    );
    expect(
      container.querySelector('.jp-GpuHygiene-originsNote')?.textContent
    ).toBe(
      '130.0 MiB live on all devices · 4 B allocated before cell [3] or off the Python stack'
    );
    expect(
      container.querySelector('.jp-GpuHygiene-originsCost')?.textContent
    ).toBe(
      'Costs each CUDA allocation about 1.5 µs; a training step took 1.04× as long (H100, bench).'
    );
    fireEvent.click(rows[3].querySelector('button') as Element);
    expect(gone).toEqual([[7, 2]]);
    fireEvent.click(
      container.querySelector('[data-action="record-origins"]') as Element
    );
    expect(toggled).toEqual([false]);
  });

  it("says when the user's code turned recording off", () => {
    const recorded = inventory();
    const note = (stoppedIn: number | null) => {
      const view = originsView(
        {
          ...recorded,
          provenance: { ...recorded.provenance!, stopped: true, stoppedIn }
        },
        0
      );
      const { container, unmount } = render(
        <OriginsSection
          view={view}
          on={true}
          device="cuda:0"
          onToggle={() => undefined}
          onGo={() => undefined}
          trans={trans}
        />
      );
      const text = container.querySelector(
        '.jp-GpuHygiene-originsNote'
      )?.textContent;
      unmount();
      return text;
    };
    expect(note(8)).toBe(
      '130.0 MiB live on all devices · your code turned recording off (seen after cell [8]): later blocks have no origin; turn recording off and on to record again · 4 B with no recorded stack'
    );
    expect(note(null)).toContain(
      'your code turned recording off: later blocks have no origin'
    );
    expect(originsView(recorded, 0)).toMatchObject({ stopped: null });
  });

  it('says what it waits for, and what an old torch lacks', () => {
    const { container, rerender } = render(
      <OriginsSection
        view={{ state: 'waiting', reason: 'cuda' }}
        on={true}
        device="cuda:0"
        onToggle={() => undefined}
        onGo={() => undefined}
        trans={trans}
      />
    );
    expect(container.textContent).toContain(
      'Recording starts after this kernel’s first cell that uses CUDA.'
    );
    rerender(
      <OriginsSection
        view={{ state: 'unsupported', error: 'TypeError: context' }}
        on={true}
        device="cuda:0"
        onToggle={() => undefined}
        onGo={() => undefined}
        trans={trans}
      />
    );
    expect(container.textContent).toContain(
      'This kernel’s torch did not record allocation stacks: TypeError: context'
    );
    rerender(
      <OriginsSection
        view={{ state: 'unsupported', error: null }}
        on={true}
        device="cuda:0"
        onToggle={() => undefined}
        onGo={() => undefined}
        trans={trans}
      />
    );
    expect(container.textContent).toContain(
      'This kernel’s torch did not record allocation stacks: it has no torch.cuda.memory._record_memory_history (torch 2.1 or later has)'
    );
    rerender(
      <OriginsSection
        view={{ state: 'off' }}
        on={false}
        device="cuda:0"
        onToggle={() => undefined}
        onGo={() => undefined}
        trans={trans}
      />
    );
    expect(container.querySelector('table')).toBeNull();
    expect(
      (
        container.querySelector(
          '[data-action="record-origins"]'
        ) as HTMLInputElement
      ).checked
    ).toBe(false);
  });
});
