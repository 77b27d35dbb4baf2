// Muster dashboard: fetches /api/… and builds the page with DOM calls only. Every string from
// the server (group ids, client ids, hosts: chosen by clients) goes through textContent or
// setAttribute, never through innerHTML, so none of it is ever parsed as markup.
'use strict';

(function () {
  const REFRESH_MS = 2000;
  const TOKEN_KEY = 'muster-dashboard-token';
  const STATES = ['Stable', 'PreparingRebalance', 'CompletingRebalance', 'Assigning', 'Reconciling', 'Empty'];

  const app = document.getElementById('app');
  const statusEl = document.getElementById('status');

  // ---- DOM helpers -------------------------------------------------------------------------

  // h('td', {class: 'x', 'data-label': 'Group'}, child, 'text', …): strings become text nodes.
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === 'class') el.className = value;
      else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function groupHref(id) {
    return '/groups/' + encodeURIComponent(id);
  }

  function badge(text, cls) {
    return h('span', { class: 'badge ' + cls }, text);
  }

  function stateBadge(state) {
    const known = STATES.includes(state) || state === 'Dead';
    return badge(state, known ? 's-' + state : 's-Dead');
  }

  function fmtInt(n) {
    return typeof n === 'number' ? n.toLocaleString('en-US') : '–';
  }

  function fmtDuration(ms) {
    if (typeof ms !== 'number' || ms < 0) return '–';
    if (ms < 1000) return ms + ' ms';
    const s = ms / 1000;
    if (s < 60) return (s < 10 ? s.toFixed(1) : Math.round(s)) + ' s';
    const m = s / 60;
    const rest = (n, unit) => (n ? ' ' + n + ' ' + unit : '');
    if (m < 60) return Math.floor(m) + ' min' + rest(Math.floor(s % 60), 's');
    const hr = m / 60;
    if (hr < 48) return Math.floor(hr) + ' h' + rest(Math.floor(m % 60), 'min');
    return Math.floor(hr / 24) + ' d';
  }

  function fmtAgo(ms) {
    return typeof ms === 'number' ? fmtDuration(ms) + ' ago' : '–';
  }

  function fmtTime(epochMs) {
    if (typeof epochMs !== 'number') return '–';
    const d = new Date(epochMs);
    return d.toLocaleString(undefined, { hour12: false });
  }

  // [0,1,2,5,7,8] → "0–2, 5, 7–8"
  function ranges(parts) {
    const sorted = [...parts].sort((a, b) => a - b);
    const out = [];
    for (let i = 0; i < sorted.length; i++) {
      let j = i;
      while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
      out.push(i === j ? String(sorted[i]) : sorted[i] + '–' + sorted[j]);
      i = j;
    }
    return out.join(', ');
  }

  function assignmentText(assignment) {
    if (!assignment || assignment.length === 0) return '–';
    return assignment.map((tp) => tp.topic + ': ' + ranges(tp.partitions)).join('; ');
  }

  // {kind: 'session_expired', member_id, client_id, host, detail} → "session expired:
  // worker-2 @ 10.0.0.7 (member id) — detail", the member id in a smaller font.
  function triggerText(t) {
    if (!t) return 'unknown';
    const kind = String(t.kind).replace(/_/g, ' ');
    return h('span', { class: 'trigger' },
      h('strong', null, kind),
      t.client_id ? ': ' + t.client_id + ' @ ' + t.host : '',
      t.member_id ? [' ', h('span', { class: 'mono muted' }, t.member_id)] : null,
      t.detail ? ' — ' + t.detail : '');
  }

  function setStatus(text, isError) {
    statusEl.textContent = text;
    statusEl.classList.toggle('error', !!isError);
  }

  // ---- fetching ----------------------------------------------------------------------------

  class AuthNeeded extends Error {}

  async function fetchJson(url) {
    const headers = { Accept: 'application/json' };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = 'Bearer ' + token;
    const response = await fetch(url, { headers, cache: 'no-store', credentials: 'omit' });
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      throw new Error('HTTP ' + response.status + ': not JSON');
    }
    if (response.status === 401) throw new AuthNeeded(body && body.error);
    if (!response.ok) {
      const err = new Error((body && body.error) || 'HTTP ' + response.status);
      err.status = response.status;
      throw err;
    }
    return body;
  }

  function showLogin(message) {
    const input = h('input', { type: 'password', autocomplete: 'off', placeholder: 'token', 'aria-label': 'token' });
    const form = h('form', { class: 'panel login', onsubmit: (ev) => {
      ev.preventDefault();
      if (input.value) sessionStorage.setItem(TOKEN_KEY, input.value);
      start();
    } },
    h('h1', null, 'Token needed'),
    h('p', { class: 'muted' }, 'This server has an auth file. Give the token of a principal: the dashboard shows the groups it may describe. The token stays in this tab.'),
    message ? h('div', { class: 'notice' }, message) : null,
    input,
    h('button', { type: 'submit' }, 'Open'));
    app.replaceChildren(form);
    input.focus();
  }

  // ---- the group list ----------------------------------------------------------------------

  function listView() {
    const params = new URLSearchParams(location.search);
    const view = {
      filter: params.get('filter') || '',
      state: params.get('state') || '',
      after: params.get('after'),
      before: params.get('before'),
      last: null,
    };
    const search = h('input', {
      type: 'search', placeholder: 'Filter groups by id', 'aria-label': 'Filter groups by id',
      value: view.filter, autocomplete: 'off', spellcheck: 'false',
    });
    let debounce = null;
    search.addEventListener('input', () => {
      clearTimeout(debounce);
      debounce = setTimeout(() => {
        view.filter = search.value;
        view.after = view.before = null;
        navigate(false);
      }, 250);
    });
    const chips = h('div', { class: 'chips', role: 'group', 'aria-label': 'state' });
    const summary = h('div', { class: 'summary' });
    const body = h('div');
    const pager = h('div', { class: 'pager' });
    app.replaceChildren(
      h('h1', null, 'Consumer groups'),
      h('div', { class: 'toolbar' }, search),
      chips, summary, body, pager);

    function url() {
      const q = new URLSearchParams();
      if (view.filter) q.set('filter', view.filter);
      if (view.state) q.set('state', view.state);
      if (view.after) q.set('after', view.after);
      if (view.before) q.set('before', view.before);
      return q;
    }

    function navigate(push) {
      const q = url().toString();
      const target = '/' + (q ? '?' + q : '');
      if (push) history.pushState(null, '', target); else history.replaceState(null, '', target);
      refresh().catch(report);
    }

    function renderChips(data) {
      const all = h('button', { class: 'chip', type: 'button', 'aria-pressed': view.state === '' ? 'true' : 'false',
        onclick: () => { view.state = ''; view.after = view.before = null; navigate(true); } },
      'All', h('span', { class: 'n' }, fmtInt(data.total)));
      const perState = (data.states || []).map((s) => h('button', {
        class: 'chip', type: 'button', 'aria-pressed': view.state === s.state ? 'true' : 'false',
        onclick: () => { view.state = s.state; view.after = view.before = null; navigate(true); },
      }, s.state, h('span', { class: 'n' }, fmtInt(s.groups))));
      chips.replaceChildren(all, ...perState);
    }

    function flags(g) {
      const out = [];
      if (g.stuck) out.push(badge('stuck', 'flag-stuck'));
      if (g.storm) out.push(badge('storm', 'flag-storm'));
      if (g.unowned) out.push(badge('unowned partitions', 'flag-stuck'));
      if (g.quarantined > 0) {
        const until = g.quarantine_drop_at_ms ? ' until ' + new Date(g.quarantine_drop_at_ms).toISOString() : '';
        out.push(h('span', { title: 'expired offsets held' + until + ': muster offsets restore ' + g.group_id },
          badge(fmtInt(g.quarantined) + ' offsets quarantined', 'flag-storm')));
      }
      return out.length ? out : '–';
    }

    function lastRebalance(g) {
      const r = g.last_rebalance;
      if (!r) return '–';
      const trigger = r.trigger && r.trigger.kind ? String(r.trigger.kind).replace(/_/g, ' ') : '';
      return [fmtAgo(r.ago_ms), trigger ? h('div', { class: 'muted' }, trigger + ' → gen ' + r.generation) : null];
    }

    function render(data) {
      view.last = data;
      renderChips(data);
      const shown = data.groups.length;
      if (shown === 0) {
        summary.textContent = data.matching === 0 && (view.filter || view.state)
          ? 'No group matches (' + fmtInt(data.total) + ' groups in all).'
          : '';
        body.replaceChildren(h('div', { class: 'panel empty' },
          data.total === 0 ? 'No groups on this node yet.' : 'Nothing on this page.'));
      } else {
        summary.textContent = 'Showing ' + fmtInt(data.offset + 1) + '–' + fmtInt(data.offset + shown) +
          ' of ' + fmtInt(data.matching) + (data.matching !== data.total ? ' matching (' + fmtInt(data.total) + ' groups)' : ' groups');
        const rows = data.groups.map((g) => h('tr', null,
          h('td', { class: 'lead', 'data-label': 'Group' }, h('a', { class: 'id mono', href: groupHref(g.group_id) }, g.group_id)),
          h('td', { 'data-label': 'State' }, h('span', null, stateBadge(g.state), h('div', { class: 'muted' }, 'for ' + fmtDuration(g.state_for_ms)))),
          h('td', { class: 'num', 'data-label': 'Members' }, fmtInt(g.members)),
          h('td', { class: 'num', 'data-label': 'Generation' }, g.generation >= 0 ? fmtInt(g.generation) : '–'),
          h('td', { 'data-label': 'Last rebalance' }, h('span', null, lastRebalance(g))),
          h('td', { 'data-label': 'Flags' }, h('span', null, flags(g)))));
        body.replaceChildren(h('table', { class: 'cards', id: 'groups' },
          h('thead', null, h('tr', null,
            h('th', null, 'Group'), h('th', null, 'State'), h('th', { class: 'num' }, 'Members'),
            h('th', { class: 'num' }, 'Generation'), h('th', null, 'Last rebalance'), h('th', null, 'Flags'))),
          h('tbody', null, rows)));
      }
      const first = data.groups[0];
      const lastRow = data.groups[data.groups.length - 1];
      pager.replaceChildren(
        h('button', { type: 'button', disabled: data.offset === 0 || !first,
          onclick: () => { view.before = first.group_id; view.after = null; navigate(true); } }, '← Previous'),
        h('button', { type: 'button', disabled: !data.more_after || !lastRow,
          onclick: () => { view.after = lastRow.group_id; view.before = null; navigate(true); } }, 'Next →'),
        h('button', { type: 'button', disabled: data.offset === 0,
          onclick: () => { view.after = view.before = null; navigate(true); } }, 'First page'));
    }

    async function refresh() {
      const data = await fetchJson('/api/groups?' + url().toString());
      render(data);
    }

    return { refresh };
  }

  // ---- one group ---------------------------------------------------------------------------

  function groupView(groupId) {
    document.title = groupId + ' · Muster';
    const why = h('section');
    const facts = h('div', { class: 'facts' });
    const title = h('h1', { class: 'mono' }, groupId);
    const members = h('section');
    const assignment = h('section');
    const journal = h('section');
    const notice = h('div');
    app.replaceChildren(
      h('a', { class: 'back', href: '/' }, '← All groups'),
      title, notice, facts, why, members, assignment, journal);

    function fact(k, v) {
      return h('div', { class: 'fact' }, h('div', { class: 'k' }, k), h('div', { class: 'v' }, v));
    }

    // A member as people recognise it: client id @ host, then the member id, smaller.
    function memberLabel(g, id) {
      const m = (g.members || []).find((x) => x.member_id === id);
      return h('span', { class: 'who' },
        m ? m.client_id + ' @ ' + m.host : null,
        h('span', { class: 'muted mono' }, id));
    }

    function renderWhy(g) {
      const d = g.diagnosis;
      if (!d) {
        why.replaceChildren(...(g.insight_error ? [h('h2', null, 'Why'), h('p', { class: 'muted' }, g.insight_error)] : []));
        return;
      }
      const lines = [];
      let level = '';
      const r = d.rebalance;
      if (r) {
        level = r.stuck ? 'alert' : 'warn';
        const verb = r.phase === 'sync' ? 'send SyncGroup'
          : r.phase === 'reconcile' ? 'give up partitions other members wait for' : 'rejoin (JoinGroup)';
        lines.push(h('p', null, h('strong', null, r.stuck ? 'Stuck: ' : 'Rebalancing: '),
          'started ' + fmtAgo(r.started_ms_ago) + ' by ', triggerText(r.trigger), '. ',
          'Waiting ' + fmtDuration(r.phase_for_ms) + ' for ' + fmtInt(r.waiting_for.length + r.omitted) +
            ' member(s) to ' + verb +
            (r.pending_joins ? ' and ' + fmtInt(r.pending_joins) + ' new member(s) to join' : '') + '; ',
          typeof r.deadline_in_ms === 'number'
            ? (r.deadline_in_ms >= 0 ? 'gives up in ' + fmtDuration(r.deadline_in_ms) : 'giving up now')
            : 'no deadline yet', '.'));
        if (r.waiting_for.length) {
          lines.push(h('ul', { id: 'waiting' }, r.waiting_for.map((w) => h('li', null,
            h('span', { class: 'mono' }, w.member_id),
            ' — ' + w.client_id + ' @ ' + w.host,
            w.instance_id ? ' (instance ' + w.instance_id + ')' : '',
            w.leader ? ' ' : '', w.leader ? badge('leader', 'flag-leader') : null,
            ', last heard ' + fmtAgo(w.last_heard_ms_ago)))));
        }
        if (r.omitted) lines.push(h('p', { class: 'muted' }, fmtInt(r.omitted) + ' more not listed.'));
      }
      if (d.unowned && d.unowned.length) {
        level = 'alert';
        lines.push(h('p', null, h('strong', null, 'Partitions nobody owns: '),
          assignmentText(d.unowned),
          typeof d.unowned_since_ms_ago === 'number' ? ' (for ' + fmtDuration(d.unowned_since_ms_ago) + ')' : ''));
      }
      if (d.storm) {
        level = level || 'warn';
        lines.push(h('p', null, h('strong', null, 'Rebalance storm: '),
          fmtInt(d.rebalances_in_window) + ' rebalances in the last ' + fmtDuration(d.storm_window_ms) +
          ' (more than ' + fmtInt(d.storm_threshold) + ').'));
      }
      if (lines.length === 0) {
        lines.push(h('p', null, 'Nothing is waiting: no rebalance in progress, every subscribed partition has an owner' +
          (d.rebalances_in_window ? ', ' + fmtInt(d.rebalances_in_window) + ' rebalance(s) in the last ' + fmtDuration(d.storm_window_ms) : '') + '.'));
      }
      why.replaceChildren(h('h2', null, 'Why'), h('div', { class: 'panel why ' + level, id: 'why' }, lines));
    }

    // A consumer-protocol member's epoch and target, and what it gives up or waits for.
    function consumerCells(g, m) {
      if (!g.consumer) return [];
      const c = (g.consumer.members || []).find((x) => x.member_id === m.member_id) || {};
      const epoch = c.member_epoch === -2 ? 'left (static)' : fmtInt(c.member_epoch);
      return [
        h('td', { 'data-label': 'Epoch' }, epoch),
        h('td', { 'data-label': 'Target' }, h('span', { class: 'id' }, assignmentText(c.target || []))),
        h('td', { 'data-label': 'Giving up' }, h('span', { class: 'id' }, assignmentText(c.revoking || []) || '–')),
        h('td', { 'data-label': 'Waiting for' }, h('span', { class: 'id' }, assignmentText(c.awaiting || []) || '–')),
      ];
    }

    function renderMembers(g) {
      const list = g.members || [];
      const consumerHeads = g.consumer
        ? [h('th', null, 'Epoch'), h('th', null, 'Target'), h('th', null, 'Giving up'), h('th', null, 'Waiting for')] : [];
      const more = g.members_total > list.length
        ? h('p', { class: 'muted' }, 'Showing ' + fmtInt(list.length) + ' of ' + fmtInt(g.members_total) + ' members.') : null;
      const table = list.length === 0 ? h('div', { class: 'panel empty' }, 'No members.') :
        h('table', { class: 'cards', id: 'members' },
          h('thead', null, h('tr', null, h('th', null, 'Member'), h('th', null, 'Client id'), h('th', null, 'Host'),
            h('th', null, 'Partitions'), ...consumerHeads, h('th', null, 'Last heard'))),
          h('tbody', null, list.map((m) => h('tr', null,
            h('td', { class: 'lead', 'data-label': 'Member' }, h('span', null,
              h('span', { class: 'id mono' }, m.member_id),
              m.instance_id ? h('div', { class: 'muted' }, 'instance ' + m.instance_id) : null,
              h('div', null, m.leader ? badge('leader', 'flag-leader') : null,
                m.holding_rebalance ? badge('waited for', 'flag-waiting') : null))),
            h('td', { 'data-label': 'Client id' }, h('span', { class: 'id' }, m.client_id)),
            h('td', { 'data-label': 'Host' }, h('span', { class: 'id mono' }, m.host)),
            h('td', { 'data-label': 'Partitions' }, h('span', { class: 'id' }, assignmentText(m.assignment))),
            ...consumerCells(g, m),
            h('td', { 'data-label': 'Last heard' }, fmtAgo(m.last_seen_ms_ago))))));
      members.replaceChildren(...[h('h2', null, 'Members (' + fmtInt(g.members_total) + ')'), more, table].filter(Boolean));
    }

    function renderAssignment(g) {
      const topics = g.assignment || [];
      if (topics.length === 0) {
        assignment.replaceChildren(h('h2', null, 'Assignment'), h('div', { class: 'panel empty' }, 'Nothing assigned.'));
        return;
      }
      const cards = topics.map((t) => {
        // Consecutive partitions of one member in one line.
        const byMember = new Map();
        for (const p of t.partitions) {
          if (!byMember.has(p.member_id)) byMember.set(p.member_id, []);
          byMember.get(p.member_id).push(p.partition);
        }
        const rows = [...byMember.entries()]
          .sort((a, b) => Math.min(...a[1]) - Math.min(...b[1]))
          .map(([member, parts]) => h('div', { class: 'row' },
            h('span', { class: 'parts mono' }, ranges(parts)),
            memberLabel(g, member)));
        return h('div', { class: 'panel' },
          h('div', { class: 'topic mono' }, t.topic, h('span', { class: 'muted' }, ' · ' + t.partitions.length + ' partitions')),
          rows);
      });
      assignment.replaceChildren(h('h2', null, 'Assignment'), h('div', { class: 'assign', id: 'assignment' }, cards));
    }

    function renderJournal(g) {
      if (!g.journal) {
        journal.replaceChildren();
        return;
      }
      const entries = g.journal;
      if (entries.length === 0) {
        journal.replaceChildren(h('h2', null, 'Rebalances'), h('div', { class: 'panel empty' }, 'No rebalance recorded yet.'));
        return;
      }
      const waited = (r) => (r.waited_for || []).map((w) => w.member_id + ' ' +
        (typeof w.rejoin_ms === 'number' ? 'after ' + fmtDuration(w.rejoin_ms) : 'never rejoined')).join(', ');
      const items = entries.map((r) => h('li', null, h('div', { class: 'card' },
        h('div', { class: 'head' },
          h('span', { class: 'gen' }, 'Generation ' + r.generation),
          h('span', null, triggerText(r.trigger)),
          h('span', { class: 'when', title: fmtTime(r.started_at) }, fmtAgo(r.ago_ms))),
        h('div', { class: 'detail' },
          h('div', null, 'Barrier ' + fmtDuration(r.barrier_ms) + ' · sync ' +
            (typeof r.sync_ms === 'number' ? fmtDuration(r.sync_ms) : 'never') +
            (r.assignor ? ' · ' + r.assignor : '') + ' · ' + fmtInt(r.members) + ' member(s) · ' +
            (typeof r.moved === 'number' ? fmtInt(r.moved) + ' partition(s) moved' : 'no assignment')),
          r.joined && r.joined.length ? h('div', null, 'Joined: ', h('span', { class: 'mono' }, r.joined.join(', '))) : null,
          r.left && r.left.length ? h('div', null, 'Left: ', h('span', { class: 'mono' }, r.left.join(', '))) : null,
          r.evicted && r.evicted.length ? h('div', null, 'Removed at the barrier: ', h('span', { class: 'mono' }, r.evicted.join(', '))) : null,
          r.waited_for && r.waited_for.length ? h('div', { class: 'muted' }, 'Waited for: ' + waited(r)) : null,
          (r.changes || []).map((c) => h('div', null, h('span', { class: 'mono' }, c.member_id), ': ',
            c.gained && c.gained.length ? '+' + assignmentText(c.gained) + ' ' : '',
            c.revoked && c.revoked.length ? '−' + assignmentText(c.revoked) : '')),
          r.omitted ? h('div', { class: 'muted' }, fmtInt(r.omitted) + ' more entries not listed') : null))));
      journal.replaceChildren(h('h2', null, 'Rebalances (newest first)'), h('ol', { class: 'timeline', id: 'journal' }, items));
    }

    function render(g) {
      notice.replaceChildren();
      const flagsEl = [];
      if (g.diagnosis && g.diagnosis.stuck) flagsEl.push(badge('stuck', 'flag-stuck'));
      if (g.diagnosis && g.diagnosis.unowned && g.diagnosis.unowned.length) flagsEl.push(badge('unowned partitions', 'flag-stuck'));
      if (g.diagnosis && g.diagnosis.storm) flagsEl.push(badge('storm', 'flag-storm'));
      const epochs = g.consumer
        ? [fact('Protocol', 'consumer'), fact('Group epoch', fmtInt(g.consumer.group_epoch)),
          fact('Target epoch', fmtInt(g.consumer.assignment_epoch))]
        : [fact('Generation', fmtInt(g.generation))];
      facts.replaceChildren(
        fact('State', [stateBadge(g.state), flagsEl]),
        ...epochs,
        fact('Members', fmtInt(g.members_total)),
        fact('Assignor', g.assignor || '–'),
        fact('Leader', g.leader_id ? memberLabel(g, g.leader_id) : '–'));
      renderWhy(g);
      renderMembers(g);
      renderAssignment(g);
      renderJournal(g);
    }

    async function refresh() {
      try {
        render(await fetchJson('/api/groups/' + encodeURIComponent(groupId)));
      } catch (e) {
        if (e.status === 404 || e.status === 403) {
          notice.replaceChildren(h('div', { class: 'notice' }, e.message));
          facts.replaceChildren();
          for (const s of [why, members, assignment, journal]) s.replaceChildren();
          return;
        }
        throw e;
      }
    }

    return { refresh };
  }

  // ---- routing and refreshing --------------------------------------------------------------

  let current = null;
  let timer = null;

  function report(e) {
    if (e instanceof AuthNeeded) {
      clearTimeout(timer);
      const hadToken = sessionStorage.getItem(TOKEN_KEY);
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin(hadToken ? e.message : null);
      return false;
    }
    setStatus('not updated: ' + e.message, true);
    return true;
  }

  async function tick() {
    if (document.hidden || !current) return true;
    try {
      await current.refresh();
      setStatus('updated ' + new Date().toLocaleTimeString(undefined, { hour12: false }));
      return true;
    } catch (e) {
      return report(e);
    }
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (await tick()) schedule();
    }, REFRESH_MS);
  }

  function route() {
    const path = location.pathname;
    if (path.startsWith('/groups/')) {
      let id = null;
      try {
        id = decodeURIComponent(path.slice('/groups/'.length));
      } catch (e) {
        id = null;
      }
      if (id === null || id === '') {
        app.replaceChildren(h('div', { class: 'notice' }, 'Not a group address.'), h('a', { href: '/' }, '← All groups'));
        return null;
      }
      return groupView(id);
    }
    document.title = 'Muster';
    return listView();
  }

  async function start() {
    current = route();
    if (await tick()) schedule();
  }

  window.addEventListener('popstate', start);
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) {
      clearTimeout(timer);
    } else {
      tick().then((ok) => { if (ok) schedule(); });
    }
  });
  start();
}());
