/* layerscope HTML report: draws the tabs from the data in #report-data (see layerscope/report/html.py).
 * The data is gzip-compressed JSON in base64; it is decoded (DecompressionStream, JSON.parse) the first time a
 * tab needs it: the Summary is server-rendered markup and draws without it. The layer data is columnar: one array
 * per field (layer i at position i), repeated strings as indices into DATA.strings; a layer's details are built
 * from the columns when it is clicked, and the layer table draws only the rows in view (fixed row height).
 * Safety: text from the run (layer names, ops, kernels, vendor strings) is set with textContent, or passed
 * through esc() when it goes into HTML (ECharts tooltips). Nothing from the run reaches innerHTML raw.
 * The Experiments tab (only in runs with a bisect, comparison, pipeline or stress section) is static markup: its
 * layer names link to the layer's details.
 * A tab is drawn the first time it is shown; the page sets <html data-ready="1"> when the first tab is drawn
 * and each panel data-rendered="1" when it is. */
(function () {
  'use strict';
  var DATA = null, S = null, LC = null, N = 0, OP_INDEX = {}, loading = null;
  var STRING_COLS = {op: 1, shapes: 1, bound: 1, unit: 1, status: 1, group: 1, fallback: 1};
  var COLOURS = null;  // op type -> colour: DATA.colours, the one map every chart and legend colours by
  var charts = {};

  // ------------------------------------------------------------------ data
  function loadData() {
    if (loading) return loading;
    var text = document.getElementById('report-data').textContent.trim();
    var bin = atob(text), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    loading = new Response(stream).text().then(function (json) {
      DATA = JSON.parse(json);
      S = DATA.strings;
      LC = DATA.layers;
      N = DATA.n;
      DATA.ops.forEach(function (op, k) { OP_INDEX[op] = k; });
      COLOURS = {};
      DATA.colours.colours.forEach(function (c) { COLOURS[c[0]] = c[1]; });
      return DATA;
    });
    return loading;
  }
  // A packed numeric column (html.py's _packed): ["d", scale, deltas] or ["n", values] -> the values.
  function unpack(col) {
    if (col[0] !== 'd') return col[1];
    var scale = col[1], deltas = col[2], out = new Array(deltas.length), acc = 0;
    for (var i = 0; i < deltas.length; i++) {
      if (deltas[i] === null) { out[i] = null; continue; }
      acc += deltas[i];
      out[i] = scale === 1 ? acc : acc / scale;
    }
    return out;
  }
  function str(ref) { return ref === null || ref === undefined ? null : S[ref]; }
  // The value of column key for layer i (strings decoded; 'index' is the position).
  function val(key, i) {
    if (key === 'index') return i;
    var v = LC[key][i];
    return STRING_COLS[key] ? str(v) : v;
  }
  function layer(i) {
    if (i === null || i === undefined || i < 0 || i >= N) return null;
    var o = {index: i};
    Object.keys(LC).forEach(function (key) { o[key] = val(key, i); });
    return o;
  }

  // ------------------------------------------------------------------ helpers
  function esc(value) {
    return String(value).replace(/[&<>"']/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
    });
  }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  // Number formats: the text of layerscope.report.units' functions (the terminal's), for the same number.
  // pyFixed(v, d) is Python's f"{v:.{d}f}": the exact value rounded half to even (toFixed rounds an exact tie up).
  var TIE = '5' + new Array(30).join('0');
  function pyFixed(v, d) {
    var a = Math.abs(v), text = a.toFixed(d), exact = a.toFixed(Math.min(100, d + 30));
    if (exact.slice(exact.length - 30) === TIE && (text.charCodeAt(text.length - 1) - 48) % 2 === 1) {
      text = exact.slice(0, exact.length - 30);
      if (d === 0) text = text.slice(0, -1);  // the '.'
    }
    return (v < 0 || Object.is(v, -0) ? '-' : '') + text;
  }
  function missing(v) { return v === null || v === undefined || typeof v !== 'number'; }
  function fmtUs(v) {  // human_us
    if (missing(v)) return '-';
    var a = Math.abs(v);
    if (a >= 1e6) return pyFixed(v / 1e6, 2) + ' s';
    if (a >= 1e3) return pyFixed(v / 1e3, 2) + ' ms';
    return pyFixed(v, 1) + ' µs';
  }
  function fmtCount(v) {  // human_count
    if (missing(v)) return '-';
    var units = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
    for (var i = 0; i < units.length; i++) if (Math.abs(v) >= units[i][0]) return pyFixed(v / units[i][0], 2) + ' ' + units[i][1];
    return pyFixed(v, 0);
  }
  function fmtBytes(v) {  // human_bytes
    if (missing(v)) return '-';
    var units = [[1073741824, 'GiB'], [1048576, 'MiB'], [1024, 'KiB']];
    for (var i = 0; i < units.length; i++) if (Math.abs(v) >= units[i][0]) return pyFixed(v / units[i][0], 2) + ' ' + units[i][1];
    return pyFixed(v, 0) + ' B';
  }
  function fixed(d) { return function (v) { return missing(v) ? '-' : pyFixed(v, d); }; }
  function pct(v) { return missing(v) ? '-' : pyFixed(100 * v, 1) + '%'; }
  function fmtNum(v) { return missing(v) ? '-' : Number.isInteger(v) ? String(v) : pyFixed(v, 3); }
  function yesNo(v) { return v === true ? 'yes' : v === false ? 'no' : '-'; }
  // How a detail value is shown, by the format html_text.detail_label gives its key.
  var FORMATS = {us: fmtUs, bytes: fmtBytes, count: fmtCount, pct: pct, x2: fixed(2), int: fmtNum, num: fmtNum,
    yesno: yesNo};
  // The colour of op type `op` (null: a span of no layer), from the one map DATA.colours.
  function opColor(op) {
    if (op === null || op === undefined) return DATA.colours.none;
    return COLOURS[op] || DATA.colours.other;
  }
  // The legend entry an op type is drawn under: its own, or the shared "other" one.
  function category(op) {
    if (op === null || op === undefined) return DATA.colours.none_label;
    return COLOURS[op] ? op : DATA.colours.other_label;
  }
  // Fills legend `id` with the categories of `ops` (op types drawn, null for a span of no layer), in the map's
  // order: a swatch of the colour the chart uses and the category's name.
  function drawLegend(id, ops) {
    var box = document.getElementById(id);
    if (!box) return;
    var seen = {}, entries = [];
    ops.forEach(function (op) { seen[category(op)] = opColor(op); });
    DATA.colours.colours.forEach(function (c) { if (seen[c[0]]) entries.push([c[0], c[1]]); });
    [DATA.colours.other_label, DATA.colours.none_label].forEach(function (label) {
      if (seen[label]) entries.push([label, seen[label]]);
    });
    box.replaceChildren();
    box.appendChild(el('li', 'legend-title', DATA.colours.by + ':'));
    entries.forEach(function (e) {
      var li = el('li'), sw = el('span', 'swatch');
      sw.style.background = e[1];
      li.dataset.category = e[0];
      li.dataset.colour = e[1];
      li.appendChild(sw);
      li.appendChild(document.createTextNode(e[0]));
      box.appendChild(li);
    });
  }
  // A value axis whose first and last labels sit inside the plot (not cut at the chart's edge).
  function timeAxis(extra) {
    return Object.assign({type: 'value', axisLabel: {formatter: function (v) { return fmtUs(v); },
      alignMinLabel: 'left', alignMaxLabel: 'right', hideOverlap: true}}, extra || {});
  }
  function layerName(i) { return i === null || i === undefined || i < 0 || i >= N ? '' : LC.id[i]; }
  function tip(title, rows) {
    var html = '<div class="tip"><b>' + esc(title) + '</b>';
    rows.forEach(function (r) { if (r[1] !== null && r[1] !== undefined && r[1] !== '') html += '<br>' + esc(r[0]) + ': ' + esc(r[1]); });
    return html + '</div>';
  }
  function makeChart(id) {
    var node = document.getElementById(id);
    if (!node) return null;
    var chart = echarts.init(node, null, {renderer: 'canvas'});
    charts[id] = chart;
    return chart;
  }
  var BASE = {animation: false, textStyle: {fontFamily: 'system-ui, sans-serif'}};
  function option(extra) { return Object.assign({}, BASE, extra); }

  // ------------------------------------------------------------------ tabs
  var renderers = {summary: function () {}, layers: renderLayers, timeline: renderTimeline,
    temporal: renderTemporal, charts: renderCharts, graph: renderGraph, experiments: renderExperiments};
  var drawn = {};
  // Shows tab `name`; draws it the first time (after the data is decoded, except the Summary). Returns a
  // promise that resolves when the tab is drawn.
  function showTab(name) {
    if (!renderers[name] || !document.getElementById('panel-' + name)) name = 'summary';
    document.querySelectorAll('.tab').forEach(function (b) { b.setAttribute('aria-selected', String(b.dataset.tab === name)); });
    document.querySelectorAll('.panel').forEach(function (p) { p.hidden = p.dataset.tab !== name; });
    var panel = document.getElementById('panel-' + name);
    function resize() { panel.querySelectorAll('.chart').forEach(function (c) { if (charts[c.id]) charts[c.id].resize(); }); }
    if (!drawn[name]) {
      drawn[name] = (name === 'summary' ? Promise.resolve() : loadData()).then(function () {
        renderers[name]();
        hideEmptyColumns(panel);
      }).catch(function (err) {
        panel.appendChild(el('p', 'error', 'This tab could not be drawn: ' + err));
        console.error(err);
      }).then(function () { panel.dataset.rendered = '1'; });
    }
    return drawn[name].then(function () { if (!panel.hidden) resize(); });
  }
  document.querySelectorAll('.tab').forEach(function (b) {
    b.addEventListener('click', function () {
      history.replaceState(null, '', '#' + b.dataset.tab);
      showTab(b.dataset.tab);
    });
  });
  window.addEventListener('resize', function () {
    Object.keys(charts).forEach(function (id) {
      if (!document.getElementById(id).closest('.panel').hidden) charts[id].resize();
    });
    if (drawn.layers && !document.getElementById('panel-layers').hidden && order) drawRows();
  });
  // Links to a layer (Summary, Experiments): its details in Layer Details; a block link filters to the block.
  document.addEventListener('click', function (ev) {
    var link = ev.target.closest && ev.target.closest('a.layer-link[data-layer]');
    if (!link) return;
    ev.preventDefault();
    if (link.dataset.block !== undefined) selectBlock(Number(link.dataset.block), Number(link.dataset.layer));
    else selectLayer(Number(link.dataset.layer));
  });

  // Hides each column of the panel's markup tables (all but the layer table, which shows only the columns with
  // a value: shownColumns) whose every cell is empty or '-' (a value the run does not hold): its header and
  // cells get class 'empty-col'. The cells stay in place, so sorting by column position is unchanged.
  function hideEmptyColumns(panel) {
    panel.querySelectorAll('table.grid:not(#layer-table)').forEach(function (table) {
      var body = table.tBodies[0], head = table.tHead && table.tHead.rows[0];
      if (!body || !body.rows.length || !head) return;
      for (var c = 0; c < head.cells.length; c++) {
        var empty = true;
        for (var r = 0; r < body.rows.length && empty; r++) {
          var cell = body.rows[r].cells[c], text = cell ? cell.textContent.trim() : '';
          empty = text === '' || text === '-';
        }
        if (!empty) continue;
        head.cells[c].classList.add('empty-col');
        for (var k = 0; k < body.rows.length; k++) if (body.rows[k].cells[c]) body.rows[k].cells[c].classList.add('empty-col');
      }
    });
  }

  // ------------------------------------------------------------------ layer details
  var TABLE_COLS = [
    {key: 'index', label: '#', num: true, fmt: String, w: 56},
    {key: 'id', label: 'layer', cls: 'id', w: 240},
    {key: 'op', label: 'op', cls: 'nowrap', w: 110},
    {key: 'shapes', label: 'shapes (in → out)', w: 210},
    {key: 'macs', label: 'MACs', num: true, fmt: fmtCount, w: 80},
    {key: 'est', label: 'est. µs', num: true, fmt: fixed(1), w: 72},
    {key: 'meas', label: 'meas. µs', num: true, fmt: fixed(1), w: 78},
    {key: 'ratio', label: 'meas/est', num: true, fmt: fixed(2), w: 76},
    {key: 'share', label: 'share', num: true, fmt: pct, w: 62},
    {key: 'bound', label: 'bound', cls: 'nowrap', w: 80},
    {key: 'unit', label: 'unit', cls: 'nowrap', w: 64},
    {key: 'group', label: 'fused group', w: 140},
    {key: 'fallback', label: 'fallback reason', w: 140}
  ];
  // The columns the table shows: TABLE_COLS less those with no value in any layer (an estimate-only run has no
  // measured columns); '#', layer and op always.
  var ALWAYS = {index: 1, id: 1, op: 1};
  var COLS = TABLE_COLS;
  function shownColumns() {
    return TABLE_COLS.filter(function (c) { return ALWAYS[c.key] || hasAny(c.key); });
  }
  var ROW_H = 24, OVERSCAN = 30;
  var sortState = {key: 'index', dir: 1};
  var selected = null;
  var order = null;  // the layers the table lists, in its order (filtered, sorted)
  var blockFilter = '';
  var collator = new Intl.Collator();
  var LOWER = null;  // the string table in lower case (the filter)

  // Compares layers i and j on column key: empty cells last either way, ties by index. Text columns compare by
  // rank (each distinct string sorted once).
  function comparator(key, dir) {
    var values;
    if (key === 'index') return function (a, b) { return dir * (a - b); };
    if (STRING_COLS[key]) {
      var refs = LC[key], distinct = {}, list = [];
      for (var i = 0; i < N; i++) if (refs[i] !== null && !distinct[refs[i]]) { distinct[refs[i]] = 1; list.push(refs[i]); }
      list.sort(function (a, b) { return collator.compare(S[a], S[b]); });
      var rank = {};
      list.forEach(function (r, k) { rank[r] = k; });
      values = new Array(N);
      for (var j = 0; j < N; j++) values[j] = refs[j] === null ? null : rank[refs[j]];
    } else {
      values = LC[key];
    }
    var text = key === 'id';
    return function (a, b) {
      var x = values[a], y = values[b];
      var xn = x === null || x === undefined || x === '', yn = y === null || y === undefined || y === '';
      if (xn !== yn) return xn ? 1 : -1;
      if (!xn && x !== y) return dir * (text ? collator.compare(x, y) : x - y);
      return a - b;
    };
  }
  function matches(i, q) {
    if (LC.id[i].toLowerCase().indexOf(q) >= 0) return true;
    var keys = ['op', 'unit', 'bound', 'group', 'fallback', 'status'];
    for (var k = 0; k < keys.length; k++) {
      var r = LC[keys[k]][i];
      if (r !== null && LOWER[r].indexOf(q) >= 0) return true;
    }
    return false;
  }
  function computeOrder() {
    var q = document.getElementById('layer-filter').value.trim().toLowerCase();
    var op = document.getElementById('op-filter').value;
    var fb = document.getElementById('fallback-only').checked;
    var block = blockFilter === '' ? -1 : Number(blockFilter);
    if (q && !LOWER) LOWER = S.map(function (t) { return String(t).toLowerCase(); });
    var list = [];
    for (var i = 0; i < N; i++) {
      if (op && str(LC.op[i]) !== op) continue;
      if (fb && !str(LC.fallback[i])) continue;
      if (block >= 0 && LC.block[i] !== block) continue;
      if (q && !matches(i, q)) continue;
      list.push(i);
    }
    order = list.sort(comparator(sortState.key, sortState.dir));
    document.getElementById('layer-count').textContent = order.length + ' of ' + N + ' layers';
  }
  function spacer(height) {
    var tr = el('tr', 'spacer'), td = el('td');
    tr.setAttribute('aria-hidden', 'true');
    td.colSpan = COLS.length;
    td.style.height = height + 'px';
    tr.appendChild(td);
    return tr;
  }
  // Draws the rows in view of the table's scroll box (and OVERSCAN more each side); spacer rows stand for the rest.
  function drawRows() {
    var wrap = document.getElementById('layer-table').closest('.table-wrap');
    var total = order.length;
    var first = Math.max(0, Math.min(total, Math.floor(wrap.scrollTop / ROW_H) - OVERSCAN));
    var last = Math.min(total, first + Math.ceil((wrap.clientHeight || 900) / ROW_H) + 2 * OVERSCAN);
    var frag = document.createDocumentFragment();
    frag.appendChild(spacer(first * ROW_H));
    for (var k = first; k < last; k++) {
      var i = order[k];
      var tr = el('tr', 'row');
      tr.dataset.index = i;
      if (str(LC.fallback[i])) tr.classList.add('fallback');
      if (selected === i) tr.classList.add('selected');
      for (var c = 0; c < COLS.length; c++) {
        var col = COLS[c], v = val(col.key, i);
        tr.appendChild(el('td', col.num ? 'num' : (col.cls || ''), col.fmt ? col.fmt(v) : (v === null || v === undefined ? '' : v)));
      }
      frag.appendChild(tr);
    }
    frag.appendChild(spacer((total - last) * ROW_H));
    document.querySelector('#layer-table tbody').replaceChildren(frag);
  }
  function redraw() { computeOrder(); drawRows(); }
  function drawHeader() {
    var tr = document.querySelector('#layer-table thead tr');
    COLS.forEach(function (c) {
      var th = el('th', c.num ? 'num' : '', c.label);
      th.dataset.key = c.key;
      th.style.width = c.w + 'px';
      th.setAttribute('role', 'columnheader');
      th.addEventListener('click', function () {
        if (sortState.key === c.key) sortState.dir = -sortState.dir;
        else sortState = {key: c.key, dir: c.num && c.key !== 'index' ? -1 : 1};
        tr.querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', sortState.dir > 0 ? 'ascending' : 'descending');
        redraw();
      });
      tr.appendChild(th);
    });
    tr.querySelector('th').setAttribute('aria-sort', 'ascending');
  }
  // A detail value as text: numbers and booleans in the format its key's label names (html_text.detail_label),
  // text as it is, lists joined, JSON text (objects) as it is.
  var detailColumns = {};  // "group/key" -> the column's values, unpacked once
  function detailColumn(group, entry) {
    var id = group + '/' + entry[0], col = entry[1];
    if (!detailColumns[id]) detailColumns[id] = col[0] === 'd' ? unpack(['d', col[1][0], col[1][1]]) : col[1];
    return detailColumns[id];
  }
  function detailText(kind, v, fmt) {
    if (kind === 's' || kind === 'j') return S[v];
    if (kind === 'l') return v.map(function (r) { return S[r]; }).join(', ');
    if (typeof v === 'boolean') return yesNo(v);
    return FORMATS[fmt] ? FORMATS[fmt](v) : String(v);
  }
  function showDetail(index) {
    selected = index;
    var box = document.getElementById('layer-detail');
    box.replaceChildren();
    if (index < 0 || index >= N) return;
    box.appendChild(el('h3', '', LC.id[index]));
    var block = DATA.blocks.names.length > 1 ? 'block ' + DATA.blocks.names[LC.block[index]] : '';
    box.appendChild(el('p', 'hint', [str(LC.op[index]), str(LC.shapes[index]), block].filter(Boolean).join(' · ')));
    DATA.details.forEach(function (group) {  // [group, [[key, [kind, column]], ...]]
      var dl = el('dl'), named = DATA.detail_labels[group[0]];  // [title, {key: [label, format]}]
      if (group[0] === 'layer') {  // the id is the table's column
        dl.appendChild(el('dt', '', 'id'));
        dl.appendChild(el('dd', '', LC.id[index]));
      }
      group[1].forEach(function (entry) {
        var kind = entry[1][0], v = detailColumn(group[0], entry)[index];
        if (v === null || v === undefined) return;
        var label = named[1][entry[0]];
        var dt = el('dt', '', label[0]);
        dt.dataset.key = entry[0];
        dl.appendChild(dt);
        dl.appendChild(el('dd', '', detailText(kind, v, label[1])));
      });
      if (!dl.childNodes.length) return;
      var h4 = el('h4', '', named[0]);
      h4.dataset.group = group[0];
      box.appendChild(h4);
      box.appendChild(dl);
    });
    document.querySelectorAll('#layer-table tbody tr.row').forEach(function (tr) {
      tr.classList.toggle('selected', Number(tr.dataset.index) === index);
    });
  }
  function renderLayers() {
    if (!document.getElementById('layer-table')) return;
    var select = document.getElementById('op-filter');
    DATA.ops.forEach(function (op) { var o = el('option', '', op); o.value = op; select.appendChild(o); });
    var blocks = document.getElementById('block-filter');
    if (blocks) {
      DATA.blocks.names.forEach(function (name, b) { var o = el('option', '', name); o.value = String(b); blocks.appendChild(o); });
      blocks.addEventListener('input', function () { blockFilter = blocks.value; redraw(); });
    }
    COLS = shownColumns();
    drawHeader();
    redraw();
    var timer = null;
    document.getElementById('layer-filter').addEventListener('input', function () {
      clearTimeout(timer);
      timer = setTimeout(redraw, N > 20000 ? 200 : 0);
    });
    ['op-filter', 'fallback-only'].forEach(function (id) {
      document.getElementById(id).addEventListener('input', redraw);
    });
    var wrap = document.getElementById('layer-table').closest('.table-wrap');
    var pending = false;
    wrap.addEventListener('scroll', function () {
      if (pending) return;
      pending = true;
      requestAnimationFrame(function () { pending = false; drawRows(); });
    });
    document.querySelector('#layer-table tbody').addEventListener('click', function (ev) {
      var tr = ev.target.closest('tr.row');
      if (tr) showDetail(Number(tr.dataset.index));
    });
  }
  // Scrolls the table so that layer index is in view (clearing the filters when they hide it).
  function scrollToLayer(index) {
    var at = order.indexOf(index);
    if (at < 0) {
      document.getElementById('layer-filter').value = '';
      document.getElementById('op-filter').value = '';
      document.getElementById('fallback-only').checked = false;
      blockFilter = '';
      var blocks = document.getElementById('block-filter');
      if (blocks) blocks.value = '';
      computeOrder();
      at = order.indexOf(index);
    }
    var wrap = document.getElementById('layer-table').closest('.table-wrap');
    wrap.scrollTop = Math.max(0, at * ROW_H - wrap.clientHeight / 2);
    drawRows();
  }
  function selectLayer(index) {
    if (index === null || index === undefined) return;
    history.replaceState(null, '', '#layers');
    showTab('layers').then(function () {
      if (index < 0 || index >= N || !document.getElementById('layer-table')) return;
      scrollToLayer(index);
      showDetail(index);
    });
  }
  // Filters the table to block b and shows layer `index` (its first layer).
  function selectBlock(b, index) {
    history.replaceState(null, '', '#layers');
    showTab('layers').then(function () {
      var blocks = document.getElementById('block-filter');
      if (!blocks) { selectLayer(index); return; }
      blocks.value = String(b);
      blockFilter = String(b);
      redraw();
      scrollToLayer(index);
      showDetail(index);
    });
  }

  // ------------------------------------------------------------------ timeline
  // Above MAX_SPANS spans a chart draws merged spans: at the current zoom, consecutive spans on a track that are
  // each narrower than a pixel (and less than a pixel apart) become one, coloured by its longest span's op; a
  // span a pixel wide or more is drawn alone. Zooming redraws the visible window the same way. The note under
  // the chart says how many spans were drawn.
  var MAX_SPANS = 5000;
  function spanItems(tl, lo, hi, px) {
    var items = [], n = tl.spans, minDur = px > 0 ? (hi - lo) / px : 0, cur = null, curLong = -1, curSmall = false;
    var names = tl.name;
    for (var k = 0; k < n; k++) {
      var s = tl.start[k], e = tl.end[k];
      if (e < lo || s > hi) continue;
      var t = tl.track[k], d = e - s;
      var small = d < minDur;
      if (cur && small && curSmall && cur[0] === t && s - cur[2] < minDur) {
        cur[2] = Math.max(cur[2], e);
        cur[5] += 1;
        if (d > curLong) { curLong = d; cur[3] = tl.layer[k]; cur[4] = names ? names[k] : null; }
        continue;
      }
      cur = [t, s, e, tl.layer[k], names ? names[k] : null, 1];
      curLong = d;
      curSmall = small;
      items.push(cur);
    }
    return items;
  }
  // The op type of layer li (null when the span belongs to no layer).
  function spanOp(li) {
    return li === null || li === undefined || isNaN(li) || li < 0 || li >= N ? null : str(LC.op[li]);
  }
  function gantt(id, tl, kind, noteId, legendId) {
    var chart = makeChart(id);
    if (!chart) return;
    var tracks = tl.tracks;
    var height = Math.max(160, 60 + 26 * tracks.length);
    chart.getDom().style.height = height + 'px';
    chart.resize();
    if (!tl.unpacked) {
      ['track', 'start', 'end', 'layer'].forEach(function (key) { tl[key] = unpack(tl[key]); });
      tl.unpacked = true;
    }
    var merged = tl.spans > MAX_SPANS;
    var note = document.getElementById(noteId);
    var mergeNote = el('span');
    note.appendChild(el('span', '', tl.note));
    note.appendChild(mergeNote);
    function items(lo, hi) {
      var px = Math.max(100, chart.getWidth() - 140);
      var list = merged ? spanItems(tl, lo, hi, px) : spanItems(tl, -Infinity, Infinity, 0);
      if (merged) {
        mergeNote.textContent = ' ' + tl.spans + ' spans: above ' + MAX_SPANS + ' this chart merges spans narrower than a ' +
          'pixel at the current zoom; ' + list.length + ' drawn for ' + fmtUs(lo) + ' to ' + fmtUs(hi) + '. Zoom in to see single layers.';
      }
      return list;
    }
    function renderItem(params, api) {
      var track = api.value(0);
      var start = api.coord([api.value(1), track]);
      var end = api.coord([api.value(2), track]);
      var h = api.size([0, 1])[1] * 0.7;
      var cs = params.coordSys;
      var rect = echarts.graphic.clipRectByRect(
        {x: start[0], y: start[1] - h / 2, width: Math.max(end[0] - start[0], 0.6), height: h},
        {x: cs.x, y: cs.y, width: cs.width, height: cs.height});
      if (!rect) return null;
      return {type: 'rect', shape: rect, style: {fill: opColor(spanOp(api.value(3)))}};
    }
    var end = tl.end_us || 1;
    var drawnOps = {};  // the categories of every span (merged or not), for the legend
    for (var k = 0; k < tl.spans; k++) drawnOps[String(spanOp(tl.layer[k]))] = spanOp(tl.layer[k]);
    drawLegend(legendId, Object.keys(drawnOps).map(function (key) { return drawnOps[key]; }));
    chart.setOption(option({
      grid: {left: 10, right: 24, top: 16, bottom: 56, containLabel: true},
      tooltip: {confine: true, formatter: function (p) {
        var v = p.value, li = v[3];
        var name = kind === 'meas' ? str(v[4]) : layerName(li);
        if (v[5] > 1) {
          return tip(v[5] + ' spans merged (zoom in)', [['track', tracks[v[0]]], ['start', fmtUs(v[1])],
            ['end', fmtUs(v[2])], ['longest', name]]);
        }
        return tip(name, [['track', tracks[v[0]]], ['start', fmtUs(v[1])], ['duration', fmtUs(v[2] - v[1])],
          ['op', layerName(li) ? str(LC.op[li]) : ''], ['layer', kind === 'meas' ? layerName(li) : '']]);
      }},
      xAxis: timeAxis({min: 0, max: end}),
      yAxis: {type: 'category', data: tracks, inverse: true, axisTick: {show: false}},
      dataZoom: [{type: 'slider', xAxisIndex: 0, filterMode: 'weakFilter', height: 18, bottom: 8},
        {type: 'inside', xAxisIndex: 0, filterMode: 'weakFilter'}],
      series: [{type: 'custom', renderItem: renderItem, encode: {x: [1, 2], y: 0}, data: items(0, end),
        progressive: 0}]
    }));
    if (merged) {
      var timer = null;
      chart.on('datazoom', function () {
        clearTimeout(timer);
        timer = setTimeout(function () {
          var z = chart.getOption().dataZoom[0];
          var lo = z.startValue !== undefined ? z.startValue : end * z.start / 100;
          var hi = z.endValue !== undefined ? z.endValue : end * z.end / 100;
          chart.setOption({series: [{data: items(lo, hi)}]});
        }, 80);
      });
    }
    chart.on('click', function (p) { if (p.value) selectLayer(p.value[3]); });
  }
  function renderTimeline() {
    var tl = DATA.timeline;
    if (tl.est) gantt('chart-est-timeline', tl.est, 'est', 'est-timeline-note', 'legend-est-timeline');
    if (tl.meas) gantt('chart-meas-timeline', tl.meas, 'meas', 'meas-timeline-note', 'legend-meas-timeline');
  }

  // ------------------------------------------------------------------ temporal statistics
  function zoomed() {
    return [{type: 'slider', xAxisIndex: 0, height: 18, bottom: 8}, {type: 'inside', xAxisIndex: 0}];
  }
  function axisTip(params) {
    var rows = params.map(function (p) { return [p.seriesName, Number(p.value[1]).toFixed(1)]; });
    return tip('t = ' + fmtUs(params.length ? params[0].value[0] : 0), rows);
  }
  function renderTemporal() {
    var t = DATA.temporal;
    if (!t) return;
    function pairs(values, scale) { return t.t.map(function (x, i) { return [x, (values[i] || 0) * scale]; }); }
    var ddr = makeChart('chart-ddr');
    ddr.setOption(option({
      legend: {top: 0}, grid: {left: 10, right: 10, top: 36, bottom: 56, containLabel: true},
      tooltip: {trigger: 'axis', confine: true, formatter: axisTip},
      xAxis: timeAxis({min: 0, max: t.t.length * t.interval}),
      yAxis: [{type: 'value', name: 'MB/s'}, {type: 'value', name: '%', max: 100, splitLine: {show: false}}],
      dataZoom: zoomed(),
      series: [
        {name: 'DDR load MB/s', type: 'line', step: 'start', symbol: 'none', areaStyle: {opacity: 0.25}, data: pairs(t.load, 1)},
        {name: 'DDR store MB/s', type: 'line', step: 'start', symbol: 'none', areaStyle: {opacity: 0.25}, data: pairs(t.store, 1)},
        {name: 'DDR % of effective' + (t.effective_gbps ? ' ' + t.effective_gbps + ' GB/s' : ''), type: 'line', step: 'start', symbol: 'none', yAxisIndex: 1, lineStyle: {type: 'dashed'}, data: pairs(t.ddr, 100)}
      ].concat(t.ddr_nominal ? [
        {name: 'DDR % of nominal ' + t.nominal_gbps + ' GB/s', type: 'line', step: 'start', symbol: 'none', yAxisIndex: 1, lineStyle: {type: 'dotted'}, data: pairs(t.ddr_nominal, 100)}
      ] : [])
    }));
    var util = makeChart('chart-util');
    util.setOption(option({
      legend: {top: 0}, grid: {left: 10, right: 10, top: 36, bottom: 56, containLabel: true},
      tooltip: {trigger: 'axis', confine: true, formatter: axisTip},
      xAxis: timeAxis({min: 0, max: t.t.length * t.interval}),
      yAxis: {type: 'value', name: 'compute %', max: 100},
      dataZoom: zoomed(),
      series: t.units.map(function (u) {
        return {name: u[0] + ' compute %', type: 'line', step: 'start', symbol: 'none', data: pairs(u[1], 100)};
      })
    }));
  }

  // ------------------------------------------------------------------ charts
  // Whether any layer has a value in column key (text: a non-empty one).
  function hasAny(key) {
    var c = LC[key], text = STRING_COLS[key];
    for (var i = 0; i < N; i++) {
      if (c[i] === null || c[i] === undefined || (text && (S[c[i]] === '' || S[c[i]] === '-'))) continue;
      return true;
    }
    return false;
  }
  function barSeries(values, name) { return {name: name, type: 'bar', data: values, barMaxWidth: 14}; }
  function renderCharts() {
    var hasEst = hasAny('est'), hasMeas = hasAny('meas');
    var byOp = DATA.charts.byOp.slice(0, 25).reverse();
    var opChart = makeChart('chart-by-op');
    if (opChart) {
      var opSeries = [];
      if (hasEst) opSeries.push(barSeries(byOp.map(function (r) { return r[2]; }), 'estimated µs'));
      if (hasMeas) opSeries.push(barSeries(byOp.map(function (r) { return r[3]; }), 'measured µs'));
      opChart.setOption(option({
        legend: {top: 0}, grid: {left: 10, right: 20, top: 30, bottom: 10, containLabel: true},
        tooltip: {trigger: 'axis', axisPointer: {type: 'shadow'}, confine: true, formatter: function (ps) {
          var r = byOp[ps[0].dataIndex];
          return tip(r[0], [['layers', r[1]], ['estimated', fmtUs(r[2])], ['measured', fmtUs(r[3])]]);
        }},
        xAxis: timeAxis(),
        yAxis: {type: 'category', data: byOp.map(function (r) { return r[0]; })},
        series: opSeries
      }));
    }
    var top = DATA.charts.top.slice().reverse();
    var topChart = makeChart('chart-top');
    if (topChart) {
      var topSeries = [];
      if (hasEst) topSeries.push(barSeries(top.map(function (i) { return LC.est[i]; }), 'estimated µs'));
      if (hasMeas) topSeries.push(barSeries(top.map(function (i) { return LC.meas[i]; }), 'measured µs'));
      topChart.setOption(option({
        legend: {top: 0}, grid: {left: 10, right: 20, top: 30, bottom: 10, containLabel: true},
        tooltip: {trigger: 'axis', axisPointer: {type: 'shadow'}, confine: true, formatter: function (ps) {
          var l = layer(top[ps[0].dataIndex]);
          return tip(l.id, [['op', l.op], ['estimated', fmtUs(l.est)], ['measured', fmtUs(l.meas)], ['share', pct(l.share)]]);
        }},
        xAxis: timeAxis(),
        yAxis: {type: 'category', data: top.map(function (i) { return LC.id[i]; }),
          axisLabel: {width: 180, overflow: 'truncate'}},
        series: topSeries
      }));
      topChart.on('click', function (p) { selectLayer(top[p.dataIndex]); });
    }
    renderScatter();
  }
  // Above LARGE_SCATTER points the scatter draws in ECharts' large mode (one colour, no per-point tooltip).
  var LARGE_SCATTER = 5000;
  function renderScatter() {
    var chart = makeChart('chart-scatter');
    if (!chart) return;
    var points = [];
    for (var i = 0; i < N; i++) if (LC.est[i] > 0 && LC.meas[i] > 0) points.push([LC.est[i], LC.meas[i], i]);
    var lo = Infinity, hi = 0;
    points.forEach(function (p) { lo = Math.min(lo, p[0], p[1]); hi = Math.max(hi, p[0], p[1]); });
    if (!points.length) { lo = 1; hi = 10; }
    var large = points.length > LARGE_SCATTER;
    var k = DATA.charts.k;
    var series = [{name: 'layers', type: 'scatter', symbolSize: large ? 3 : 6, data: points, large: large,
      itemStyle: large ? {} : {color: function (p) { return opColor(str(LC.op[p.value[2]])); }}},
    {name: 'measured = estimated', type: 'line', symbol: 'none', lineStyle: {type: 'dotted', color: '#888'},
      data: [[lo, lo], [hi, hi]], tooltip: {show: false}}];
    var note = large ? points.length + ' layers: above ' + LARGE_SCATTER + ' points the scatter is drawn in one colour. ' : '';
    if (k) {
      series.push({name: 'k = ' + k.value.toFixed(3), type: 'line', symbol: 'none', lineStyle: {color: '#e4572e'},
        data: [[lo, lo * k.value], [hi, hi * k.value]], tooltip: {show: false}});
      note += 'k = ' + k.value.toFixed(3) + ' (' + k.source +
        '): a layer above the k line runs slower than the estimate predicts relative to the others.' +
        (k.warning ? ' WARNING: ' + k.warning + '.' : '');
    }
    document.getElementById('scatter-note').textContent = note;
    if (large) document.getElementById('legend-scatter').replaceChildren();
    else drawLegend('legend-scatter', points.map(function (p) { return str(LC.op[p[2]]); }));
    chart.setOption(option({
      legend: {top: 0}, grid: {left: 10, right: 30, top: 36, bottom: 10, containLabel: true},
      tooltip: {trigger: 'item', confine: true, formatter: function (p) {
        if (p.seriesIndex !== 0) return '';
        var l = layer(p.value[2]);
        return tip(l.id, [['op', l.op], ['estimated', fmtUs(l.est)], ['measured', fmtUs(l.meas)], ['meas/est', fixed(2)(l.ratio)]]);
      }},
      xAxis: {type: 'log', name: 'estimated µs', nameLocation: 'middle', nameGap: 26,
        axisLabel: {alignMinLabel: 'left', alignMaxLabel: 'right', hideOverlap: true}},
      yAxis: {type: 'log', name: 'measured µs'},
      series: series
    }));
    chart.on('click', function (p) { if (p.seriesIndex === 0 && p.value) selectLayer(p.value[2]); });
  }

  // ------------------------------------------------------------------ graph
  var RAMP = [[217, 230, 247], [246, 199, 92], [228, 87, 46], [139, 26, 26]];
  function rampColor(f) {
    f = Math.max(0, Math.min(1, f)) * (RAMP.length - 1);
    var i = Math.min(Math.floor(f), RAMP.length - 2), t = f - i, a = RAMP[i], b = RAMP[i + 1];
    return 'rgb(' + [0, 1, 2].map(function (j) { return Math.round(a[j] + (b[j] - a[j]) * t); }).join(',') + ')';
  }
  // One node per layer up to DATA.graph.max layers; above it one node per block (the page says so).
  function renderGraph() {
    var chart = makeChart('chart-graph');
    if (!chart) return;
    var g = DATA.graph, blocks = g.blocks || null;
    var key = DATA.basis === 'measured' ? 'meas' : 'est';
    var pos = blocks ? blocks.pos : g.pos, edges = blocks ? blocks.edges : g.edges;
    var values = blocks ? blocks[key] : LC[key];
    var max = 0;
    for (var m = 0; m < values.length; m++) if (values[m] > max) max = values[m];
    var logMax = Math.log1p(max || 1);
    document.getElementById('graph-min').textContent = '0';
    document.getElementById('graph-max').textContent = fmtUs(max);
    // Wrap the depth into side-by-side bands so that a deep, narrow network fills the chart's box.
    var levels = 1, half = 0;
    pos.forEach(function (p) { levels = Math.max(levels, p[1] + 1); half = Math.max(half, Math.abs(p[0])); });
    var bandWidth = 2 * half + 2, dom = chart.getDom();
    var aspect = (dom.clientWidth || 1200) / (dom.clientHeight || 560);
    var bands = Math.max(1, Math.round(Math.sqrt(levels * 40 * aspect / (bandWidth * 60))));
    var perBand = Math.ceil(levels / bands);
    var nodes = pos.map(function (p, i) {
      var v = values[i], f = v ? Math.log1p(v) / logMax : 0;
      var band = Math.floor(p[1] / perBand);
      return {id: String(i), name: blocks ? DATA.blocks.names[i] : LC.id[i], x: (band * bandWidth + p[0]) * 60,
        y: (p[1] % perBand) * 40, value: v,
        symbolSize: 7 + 11 * f, itemStyle: {color: v === null || v === undefined ? '#c8ccd3' : rampColor(f)}};
    });
    var links = edges.map(function (e) { return {source: String(e[0]), target: String(e[1])}; });
    chart.setOption(option({
      tooltip: {confine: true, formatter: function (p) {
        if (p.dataType !== 'node') return '';
        var i = Number(p.data.id);
        if (blocks) {
          return tip(DATA.blocks.names[i], [['layers', blocks.count[i]], ['estimated', fmtUs(blocks.est[i])],
            ['measured', fmtUs(blocks.meas[i])]]);
        }
        var l = layer(i);
        return tip(l.id, [['op', l.op], ['shapes', l.shapes], ['estimated', fmtUs(l.est)], ['measured', fmtUs(l.meas)],
          ['unit', l.unit], ['bound', l.bound]]);
      }},
      series: [{type: 'graph', layout: 'none', roam: true, data: nodes, links: links, label: {show: false},
        edgeSymbol: ['none', 'arrow'], edgeSymbolSize: 4, lineStyle: {color: '#aab2bf', width: 0.8, opacity: 0.8},
        emphasis: {focus: 'adjacency', label: {show: true, position: 'right', formatter: '{b}'}}}]
    }));
    chart.on('click', function (p) {
      if (p.dataType !== 'node') return;
      var i = Number(p.data.id);
      if (blocks) selectBlock(i, blocks.first[i]);
      else selectLayer(i);
    });
  }

  // ------------------------------------------------------------------ experiments
  function renderExperiments() {
    var panel = document.getElementById('panel-experiments');
    panel.querySelectorAll('table.sortable').forEach(sortableTable);
  }
  // A click on a header sorts the rows by that column: numbers (columns of class num; '-' last) largest
  // first, text A to Z; a second click reverses. The cells are the server-rendered text.
  function sortableTable(table) {
    var heads = table.querySelectorAll('thead th');
    heads.forEach(function (th, col) {
      th.setAttribute('role', 'columnheader');
      th.addEventListener('click', function () {
        var num = th.classList.contains('num');
        var current = th.getAttribute('aria-sort');
        var dir = current ? (current === 'ascending' ? -1 : 1) : (num && col > 0 ? -1 : 1);
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col] ? a.cells[col].textContent.trim() : '';
          var y = b.cells[col] ? b.cells[col].textContent.trim() : '';
          if (!num) return dir * x.localeCompare(y);
          var u = parseFloat(x), v = parseFloat(y);
          if (isNaN(u) || isNaN(v)) return isNaN(u) - isNaN(v);
          return dir * (u - v);
        });
        body.append.apply(body, rows);
        heads.forEach(function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
      });
    });
  }

  // ------------------------------------------------------------------ start
  var first = (location.hash || '').replace('#', '');
  showTab(first).then(function () { document.documentElement.dataset.ready = '1'; });
  window.layerscopeReport = {charts: charts, showTab: showTab, selectLayer: selectLayer,
    dataLoaded: function () { return DATA !== null; },
    formats: {us: fmtUs, bytes: fmtBytes, count: fmtCount, pct: pct, fixed: pyFixed},
    colourOf: function (op) { return opColor(op); }, categoryOf: function (op) { return category(op); },
    // The value a layer's details hold for group/key, decoded from its column (undefined: no such column).
    detailValue: function (group, key, index) {
      var g = DATA.details.filter(function (d) { return d[0] === group; })[0];
      var entry = g && g[1].filter(function (e) { return e[0] === key; })[0];
      return entry ? detailColumn(group, entry)[index] : undefined;
    }};
})();
