// kvroute serve dashboard: polls the service's JSON API once a second; no build step.
(function () {
  'use strict';
  var $ = function (id) { return document.getElementById(id); };
  var fmt = function (n) { return n == null ? '–' : Number(n).toLocaleString('en-US'); };
  var refreshes = 0;

  function text(el, value) { if (el.textContent !== String(value)) { el.textContent = value; } }

  function cell(tr, cls, value) {
    var td = document.createElement('td');
    if (cls) { td.className = cls; }
    td.textContent = value;
    tr.appendChild(td);
    return td;
  }

  function otherTiers(byTier) {
    return Object.keys(byTier).filter(function (t) { return t !== 'GPU' && t !== 'CPU'; })
      .map(function (t) { return t + ' ' + fmt(byTier[t]); }).join(', ') || '–';
  }

  function renderState(s) {
    text($('total-blocks'), fmt(s.total_blocks));
    text($('unique-blocks'), fmt(s.unique_blocks));
    text($('pods-reporting'), s.pods_reporting + ' / ' + s.total_pods);
    text($('events-total'), fmt(s.events_total));
    text($('utilisation'), s.average_cache_utilization == null ? 'n/a'
      : (100 * s.average_cache_utilization).toFixed(1) + ' %');
    text($('last-updated'), s.last_updated || 'never');
    var st = $('status');
    st.className = 'badge ' + (s.ready ? 'ready' : 'not-ready');
    text(st, (s.ready ? 'ready' : 'waiting for pods') + ' · ' + s.model + ' · block ' + s.block_size);
  }

  function renderPods(pods) {
    var body = document.querySelector('#pods tbody');
    var rows = document.createDocumentFragment();
    pods.forEach(function (p) {
      var tr = document.createElement('tr');
      tr.dataset.pod = p.pod_id;
      cell(tr, 'pod', p.pod_id);
      cell(tr, 'status status-' + p.status, p.status);
      cell(tr, 'gpu', fmt(p.blocks_by_tier.GPU || 0));
      cell(tr, 'cpu', fmt(p.blocks_by_tier.CPU || 0));
      cell(tr, 'other', otherTiers(p.blocks_by_tier));
      cell(tr, 'eps', p.events_per_second.toFixed(1));
      cell(tr, 'events', fmt(p.events_total));
      cell(tr, 'evictions', p.eviction_rate_per_sec.toFixed(1));
      cell(tr, 'gaps', fmt(p.gaps));
      cell(tr, 'replays', fmt(p.replays));
      cell(tr, 'restarts', fmt(p.restarts));
      cell(tr, 'last', p.last_event || 'never');
      rows.appendChild(tr);
    });
    body.replaceChildren(rows);
  }

  function share(part, whole) {
    return whole > 0 ? (100 * part / whole).toFixed(1) + ' %' : '–';
  }

  function renderReuse(r) {
    text($('reuse-queries'), fmt(r.queries));
    text($('reuse-available'), share(r.available_blocks, r.prompt_blocks));
    text($('reuse-recommended'), share(r.recommended_blocks, r.prompt_blocks));
    text($('reuse-none'), fmt(r.misses.none_available));
    text($('reuse-below'), fmt(r.misses.below_available));
    $('reuse').dataset.availableBlocks = r.available_blocks;
    $('reuse').dataset.recommendedBlocks = r.recommended_blocks;
    $('reuse').dataset.promptBlocks = r.prompt_blocks;
  }

  function getJson(url) {
    return fetch(url, { cache: 'no-store' }).then(function (r) {
      return r.json().then(function (j) {
        if (!r.ok && r.status !== 503) { throw new Error(j.error || ('HTTP ' + r.status)); }
        return j;
      });
    });
  }

  function refresh() {
    Promise.all([getJson('/api/v1/cache/state'), getJson('/api/v1/cache/pods'),
                 getJson('/api/v1/reuse')])
      .then(function (res) {
        renderState(res[0]);
        renderPods(res[1].pods);
        renderReuse(res[2]);
        refreshes++;
        document.body.dataset.refreshes = refreshes;
      })
      .catch(function (e) { text($('status'), 'error: ' + e.message); })
      .finally(function () { setTimeout(refresh, 1000); });
  }

  function renderScores(res) {
    var body = document.querySelector('#scores tbody');
    var rows = document.createDocumentFragment();
    Object.keys(res.scores).forEach(function (pod) {
      var s = res.scores[pod];
      var tr = document.createElement('tr');
      tr.dataset.pod = pod;
      if (pod === res.recommendation) { tr.className = 'best'; }
      cell(tr, 'pod', pod);
      cell(tr, 'score', s.score.toFixed(2));
      cell(tr, 'hit', (100 * s.cache_hit_rate).toFixed(1) + ' %');
      cell(tr, 'present', fmt(s.blocks_present));
      cell(tr, 'total', fmt(s.blocks_total));
      cell(tr, 'tiers', Object.keys(s.blocks_by_tier).map(function (t) {
        return t + ' ' + s.blocks_by_tier[t]; }).join(', ') || '–');
      rows.appendChild(tr);
    });
    body.replaceChildren(rows);
    $('scores').hidden = false;
    var best = null;
    Object.keys(res.scores).forEach(function (pod) {
      if (best == null || res.scores[pod].blocks_present > res.scores[best].blocks_present) {
        best = pod;
      }
    });
    var available = best == null ? 0 : res.scores[best].blocks_present;
    var held = res.recommendation ? res.scores[res.recommendation].blocks_present : 0;
    text($('score-summary'), res.blocks_total + ' full blocks of ' + res.block_size
      + ' tokens; recommendation: ' + (res.recommendation || 'none (no pod holds a prefix)')
      + '; reuse: available ' + available + ' blocks (' + available * res.block_size
      + ' tokens' + (available > 0 ? ', on ' + best : '') + '), recommended pod holds '
      + held + ' blocks (' + held * res.block_size + ' tokens)');
    $('score-summary').dataset.available = available;
    $('score-summary').dataset.recommended = held;
  }

  $('score-form').addEventListener('submit', function (ev) {
    ev.preventDefault();
    var req = { prompt: $('prompt').value };
    if ($('model').value) { req.model = $('model').value; }
    if ($('lora').value) { req.lora = $('lora').value; }
    $('score-error').hidden = true;
    document.body.dataset.scoring = 'pending';
    fetch('/api/v1/score', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                              body: JSON.stringify(req) })
      .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, body: j }; }); })
      .then(function (r) {
        if (!r.ok) { throw new Error(r.body.error); }
        renderScores(r.body);
        document.body.dataset.scoring = 'done';
      })
      .catch(function (e) {
        var el = $('score-error');
        el.textContent = e.message;
        el.hidden = false;
        document.body.dataset.scoring = 'error';
      });
  });

  refresh();
})();
