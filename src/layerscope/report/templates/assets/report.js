/* layerscope HTML report: draws the tabs from the JSON in #report-data (see layerscope/report/html.py).
 * Safety: text from the run (layer names, ops, kernels, vendor strings) is set with textContent, or passed
 * through esc() when it goes into HTML (ECharts tooltips). Nothing from the run reaches innerHTML raw.
 * The Experiments tab (only in runs with a bisect, comparison, pipeline or stress section) is static markup: its
 * layer names link to the layer's details.
 * A tab is drawn the first time it is shown; the page sets <html data-ready="1"> when the first tab is drawn
 * and each panel data-rendered="1" when it is. */
(function () {
  'use strict';
  var DATA = JSON.parse(document.getElementById('report-data').textContent);
  var COLS = DATA.layers.cols;
  var LAYERS = DATA.layers.rows.map(function (r) {
    var o = {};
    for (var i = 0; i < COLS.length; i++) o[COLS[i]] = r[i];
    return o;
  });
  var PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7',
    '#9c755f', '#bab0ac', '#1f77b4', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#17becf'];
  var OP_INDEX = {};
  DATA.ops.forEach(function (op, i) { OP_INDEX[op] = i; });
  var charts = {};

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
  function fmtUs(v) {
    if (v === null || v === undefined) return '-';
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(2) + ' s';
    if (a >= 1e3) return (v / 1e3).toFixed(2) + ' ms';
    return v.toFixed(1) + ' µs';
  }
  function fmtCount(v) {
    if (v === null || v === undefined) return '-';
    if (v === 0) return '0';
    var units = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
    for (var i = 0; i < units.length; i++) if (Math.abs(v) >= units[i][0]) return (v / units[i][0]).toFixed(2) + ' ' + units[i][1];
    return String(Math.round(v));
  }
  function fixed(d) { return function (v) { return v === null || v === undefined ? '-' : v.toFixed(d); }; }
  function pct(v) { return v === null || v === undefined ? '-' : (100 * v).toFixed(1) + '%'; }
  function opColor(op) { return PALETTE[(OP_INDEX[op] || 0) % PALETTE.length]; }
  function layerName(i) { return i === null || i === undefined || !LAYERS[i] ? '' : LAYERS[i].id; }
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
  function showTab(name) {
    if (!renderers[name] || !document.getElementById('panel-' + name)) name = 'summary';
    document.querySelectorAll('.tab').forEach(function (b) { b.setAttribute('aria-selected', String(b.dataset.tab === name)); });
    document.querySelectorAll('.panel').forEach(function (p) { p.hidden = p.dataset.tab !== name; });
    var panel = document.getElementById('panel-' + name);
    if (!drawn[name]) {
      drawn[name] = true;
      try {
        renderers[name]();
      } catch (err) {
        panel.appendChild(el('p', 'error', 'This tab could not be drawn: ' + err));
        console.error(err);
      }
      panel.dataset.rendered = '1';
    }
    panel.querySelectorAll('.chart').forEach(function (c) { if (charts[c.id]) charts[c.id].resize(); });
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
  });

  // ------------------------------------------------------------------ layer details
  var TABLE_COLS = [
    {key: 'index', label: '#', num: true, fmt: String},
    {key: 'id', label: 'layer', cls: 'id'},
    {key: 'op', label: 'op', cls: 'nowrap'},
    {key: 'shapes', label: 'shapes (in → out)'},
    {key: 'macs', label: 'MACs', num: true, fmt: fmtCount},
    {key: 'est', label: 'est. µs', num: true, fmt: fixed(1)},
    {key: 'meas', label: 'meas. µs', num: true, fmt: fixed(1)},
    {key: 'ratio', label: 'meas/est', num: true, fmt: fixed(2)},
    {key: 'share', label: 'share', num: true, fmt: pct},
    {key: 'bound', label: 'bound', cls: 'nowrap'},
    {key: 'unit', label: 'unit', cls: 'nowrap'},
    {key: 'group', label: 'fused group'},
    {key: 'fallback', label: 'fallback reason'}
  ];
  var sortState = {key: 'index', dir: 1};
  var selected = null;

  function compareBy(key, dir) {
    return function (a, b) {
      var x = a[key], y = b[key];
      var xn = x === null || x === undefined || x === '', yn = y === null || y === undefined || y === '';
      if (xn !== yn) return xn ? 1 : -1;  // empty cells last, either direction
      if (!xn && x !== y) {
        if (typeof x === 'number' && typeof y === 'number') return dir * (x - y);
        return dir * String(x).localeCompare(String(y));
      }
      return a.index - b.index;
    };
  }
  function visibleLayers() {
    var q = document.getElementById('layer-filter').value.trim().toLowerCase();
    var op = document.getElementById('op-filter').value;
    var fb = document.getElementById('fallback-only').checked;
    return LAYERS.filter(function (l) {
      if (op && l.op !== op) return false;
      if (fb && !l.fallback) return false;
      if (!q) return true;
      return [l.id, l.op, l.unit, l.bound, l.group, l.fallback, l.status].some(function (v) {
        return v !== null && v !== undefined && String(v).toLowerCase().indexOf(q) >= 0;
      });
    }).sort(compareBy(sortState.key, sortState.dir));
  }
  function drawRows() {
    var rows = visibleLayers();
    var frag = document.createDocumentFragment();
    rows.forEach(function (l) {
      var tr = document.createElement('tr');
      tr.dataset.index = l.index;
      if (l.fallback) tr.className = 'fallback';
      if (selected === l.index) tr.classList.add('selected');
      TABLE_COLS.forEach(function (c) {
        var v = l[c.key];
        var td = el('td', c.num ? 'num' : (c.cls || ''), c.fmt ? c.fmt(v) : (v === null || v === undefined ? '' : v));
        tr.appendChild(td);
      });
      frag.appendChild(tr);
    });
    var tbody = document.querySelector('#layer-table tbody');
    tbody.replaceChildren(frag);
    document.getElementById('layer-count').textContent = rows.length + ' of ' + LAYERS.length + ' layers';
  }
  function drawHeader() {
    var tr = document.querySelector('#layer-table thead tr');
    TABLE_COLS.forEach(function (c) {
      var th = el('th', c.num ? 'num' : '', c.label);
      th.dataset.key = c.key;
      th.setAttribute('role', 'columnheader');
      th.addEventListener('click', function () {
        if (sortState.key === c.key) sortState.dir = -sortState.dir;
        else sortState = {key: c.key, dir: c.num && c.key !== 'index' ? -1 : 1};
        tr.querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', sortState.dir > 0 ? 'ascending' : 'descending');
        drawRows();
      });
      tr.appendChild(th);
    });
    tr.querySelector('th').setAttribute('aria-sort', 'ascending');
  }
  function formatDetail(v) {
    if (Array.isArray(v)) return v.map(function (x) { return typeof x === 'object' ? JSON.stringify(x) : String(x); }).join(', ');
    if (v !== null && typeof v === 'object') return JSON.stringify(v);
    return String(v);
  }
  function showDetail(index) {
    selected = index;
    var box = document.getElementById('layer-detail');
    var l = LAYERS[index];
    box.replaceChildren();
    if (!l) return;
    box.appendChild(el('h3', '', l.id));
    var summary = el('p', 'hint', [l.op, l.shapes].filter(Boolean).join(' · '));
    box.appendChild(summary);
    (DATA.details[index] || []).forEach(function (group) {  // [[group, [[key, value], ...]], ...]
      box.appendChild(el('h4', '', group[0]));
      var dl = el('dl');
      group[1].forEach(function (kv) {
        dl.appendChild(el('dt', '', kv[0]));
        dl.appendChild(el('dd', '', formatDetail(kv[1])));
      });
      box.appendChild(dl);
    });
    document.querySelectorAll('#layer-table tbody tr').forEach(function (tr) {
      tr.classList.toggle('selected', Number(tr.dataset.index) === index);
    });
  }
  function renderLayers() {
    if (!document.getElementById('layer-table')) return;
    var select = document.getElementById('op-filter');
    DATA.ops.forEach(function (op) { var o = el('option', '', op); o.value = op; select.appendChild(o); });
    drawHeader();
    drawRows();
    ['layer-filter', 'op-filter', 'fallback-only'].forEach(function (id) {
      document.getElementById(id).addEventListener('input', drawRows);
    });
    document.querySelector('#layer-table tbody').addEventListener('click', function (ev) {
      var tr = ev.target.closest('tr');
      if (tr) showDetail(Number(tr.dataset.index));
    });
  }
  function selectLayer(index) {
    if (index === null || index === undefined || !LAYERS[index]) return;
    history.replaceState(null, '', '#layers');
    showTab('layers');
    showDetail(index);
    var tr = document.querySelector('#layer-table tbody tr[data-index="' + Number(index) + '"]');
    if (tr) tr.scrollIntoView({block: 'center'});
  }

  // ------------------------------------------------------------------ timeline
  function gantt(id, tl, kind) {
    var chart = makeChart(id);
    if (!chart) return;
    var tracks = tl.tracks;
    var height = Math.max(160, 60 + 26 * tracks.length);
    chart.getDom().style.height = height + 'px';
    chart.resize();
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
      var layer = LAYERS[api.value(3)];
      return {type: 'rect', shape: rect, style: {fill: layer ? opColor(layer.op) : '#9aa4b2'}};
    }
    chart.setOption(option({
      grid: {left: 10, right: 24, top: 16, bottom: 56, containLabel: true},
      tooltip: {confine: true, formatter: function (p) {
        var v = p.value, layer = LAYERS[v[3]];
        var name = kind === 'meas' ? tl.names[v[4]] : layerName(v[3]);
        return tip(name, [['track', tracks[v[0]]], ['start', fmtUs(v[1])], ['duration', fmtUs(v[2] - v[1])],
          ['op', layer ? layer.op : ''], ['layer', kind === 'meas' && layer ? layer.id : '']]);
      }},
      xAxis: {type: 'value', min: 0, max: tl.end || 1, axisLabel: {formatter: function (v) { return fmtUs(v); }}},
      yAxis: {type: 'category', data: tracks, inverse: true, axisTick: {show: false}},
      dataZoom: [{type: 'slider', xAxisIndex: 0, filterMode: 'weakFilter', height: 18, bottom: 8},
        {type: 'inside', xAxisIndex: 0, filterMode: 'weakFilter'}],
      series: [{type: 'custom', renderItem: renderItem, encode: {x: [1, 2], y: 0}, data: tl.events,
        progressive: 0}]
    }));
    chart.on('click', function (p) { if (p.value) selectLayer(p.value[3]); });
  }
  function renderTimeline() {
    var tl = DATA.timeline;
    if (tl.est) {
      document.getElementById('est-timeline-note').textContent = tl.est.note;
      gantt('chart-est-timeline', tl.est, 'est');
    }
    if (tl.meas) {
      document.getElementById('meas-timeline-note').textContent = tl.meas.note;
      gantt('chart-meas-timeline', tl.meas, 'meas');
    }
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
      xAxis: {type: 'value', min: 0, max: t.t.length * t.interval, axisLabel: {formatter: function (v) { return fmtUs(v); }}},
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
      xAxis: {type: 'value', min: 0, max: t.t.length * t.interval, axisLabel: {formatter: function (v) { return fmtUs(v); }}},
      yAxis: {type: 'value', name: '%', max: 100},
      dataZoom: zoomed(),
      series: t.units.map(function (u) {
        return {name: u[0] + ' %', type: 'line', step: 'start', symbol: 'none', data: pairs(u[1], 100)};
      })
    }));
  }

  // ------------------------------------------------------------------ charts
  function hasAny(key) { return LAYERS.some(function (l) { return l[key] !== null && l[key] !== undefined; }); }
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
        xAxis: {type: 'value'},
        yAxis: {type: 'category', data: byOp.map(function (r) { return r[0]; })},
        series: opSeries
      }));
    }
    var top = DATA.charts.top.slice().reverse();
    var topChart = makeChart('chart-top');
    if (topChart) {
      var topSeries = [];
      if (hasEst) topSeries.push(barSeries(top.map(function (i) { return LAYERS[i].est; }), 'estimated µs'));
      if (hasMeas) topSeries.push(barSeries(top.map(function (i) { return LAYERS[i].meas; }), 'measured µs'));
      topChart.setOption(option({
        legend: {top: 0}, grid: {left: 10, right: 20, top: 30, bottom: 10, containLabel: true},
        tooltip: {trigger: 'axis', axisPointer: {type: 'shadow'}, confine: true, formatter: function (ps) {
          var l = LAYERS[top[ps[0].dataIndex]];
          return tip(l.id, [['op', l.op], ['estimated', fmtUs(l.est)], ['measured', fmtUs(l.meas)], ['share', pct(l.share)]]);
        }},
        xAxis: {type: 'value'},
        yAxis: {type: 'category', data: top.map(function (i) { return LAYERS[i].id; }),
          axisLabel: {width: 180, overflow: 'truncate'}},
        series: topSeries
      }));
      topChart.on('click', function (p) { selectLayer(top[p.dataIndex]); });
    }
    renderScatter();
  }
  function renderScatter() {
    var chart = makeChart('chart-scatter');
    if (!chart) return;
    var points = LAYERS.filter(function (l) { return l.est > 0 && l.meas > 0; })
      .map(function (l) { return [l.est, l.meas, l.index]; });
    var lo = Infinity, hi = 0;
    points.forEach(function (p) { lo = Math.min(lo, p[0], p[1]); hi = Math.max(hi, p[0], p[1]); });
    if (!points.length) { lo = 1; hi = 10; }
    var k = DATA.charts.k;
    var series = [{name: 'layers', type: 'scatter', symbolSize: 6, data: points,
      itemStyle: {color: function (p) { return opColor(LAYERS[p.value[2]].op); }}},
    {name: 'measured = estimated', type: 'line', symbol: 'none', lineStyle: {type: 'dotted', color: '#888'},
      data: [[lo, lo], [hi, hi]], tooltip: {show: false}}];
    if (k) {
      series.push({name: 'k = ' + k.value.toFixed(3), type: 'line', symbol: 'none', lineStyle: {color: '#e4572e'},
        data: [[lo, lo * k.value], [hi, hi * k.value]], tooltip: {show: false}});
      document.getElementById('scatter-note').textContent = 'k = ' + k.value.toFixed(3) + ' (' + k.source +
        '): a layer above the k line runs slower than the estimate predicts relative to the others.' +
        (k.warning ? ' WARNING: ' + k.warning + '.' : '');
    }
    chart.setOption(option({
      legend: {top: 0}, grid: {left: 10, right: 30, top: 36, bottom: 10, containLabel: true},
      tooltip: {trigger: 'item', confine: true, formatter: function (p) {
        if (p.seriesIndex !== 0) return '';
        var l = LAYERS[p.value[2]];
        return tip(l.id, [['op', l.op], ['estimated', fmtUs(l.est)], ['measured', fmtUs(l.meas)], ['meas/est', fixed(2)(l.ratio)]]);
      }},
      xAxis: {type: 'log', name: 'estimated µs', nameLocation: 'middle', nameGap: 26},
      yAxis: {type: 'log', name: 'measured µs'},
      series: series
    }));
    chart.on('click', function (p) { if (p.seriesIndex === 0) selectLayer(p.value[2]); });
  }

  // ------------------------------------------------------------------ graph
  var RAMP = [[217, 230, 247], [246, 199, 92], [228, 87, 46], [139, 26, 26]];
  function rampColor(f) {
    f = Math.max(0, Math.min(1, f)) * (RAMP.length - 1);
    var i = Math.min(Math.floor(f), RAMP.length - 2), t = f - i, a = RAMP[i], b = RAMP[i + 1];
    return 'rgb(' + [0, 1, 2].map(function (j) { return Math.round(a[j] + (b[j] - a[j]) * t); }).join(',') + ')';
  }
  function renderGraph() {
    var chart = makeChart('chart-graph');
    if (!chart) return;
    var key = DATA.basis === 'measured' ? 'meas' : 'est';
    var values = LAYERS.map(function (l) { return l[key]; });
    var max = values.reduce(function (m, v) { return v > m ? v : m; }, 0);
    var logMax = Math.log1p(max || 1);
    document.getElementById('graph-min').textContent = '0';
    document.getElementById('graph-max').textContent = fmtUs(max);
    // Wrap the depth into side-by-side bands so that a deep, narrow network fills the chart's box.
    var levels = 1, half = 0;
    DATA.graph.pos.forEach(function (p) { levels = Math.max(levels, p[1] + 1); half = Math.max(half, Math.abs(p[0])); });
    var bandWidth = 2 * half + 2, dom = chart.getDom();
    var aspect = (dom.clientWidth || 1200) / (dom.clientHeight || 560);
    var bands = Math.max(1, Math.round(Math.sqrt(levels * 40 * aspect / (bandWidth * 60))));
    var perBand = Math.ceil(levels / bands);
    var nodes = DATA.graph.pos.map(function (p, i) {
      var v = values[i], f = v ? Math.log1p(v) / logMax : 0;
      var band = Math.floor(p[1] / perBand);
      return {id: String(i), name: LAYERS[i].id, x: (band * bandWidth + p[0]) * 60, y: (p[1] % perBand) * 40, value: v,
        symbolSize: 7 + 11 * f, itemStyle: {color: v === null || v === undefined ? '#c8ccd3' : rampColor(f)}};
    });
    var links = DATA.graph.edges.map(function (e) { return {source: e[0], target: e[1]}; });
    chart.setOption(option({
      tooltip: {confine: true, formatter: function (p) {
        if (p.dataType !== 'node') return '';
        var l = LAYERS[Number(p.data.id)];
        return tip(l.id, [['op', l.op], ['shapes', l.shapes], ['estimated', fmtUs(l.est)], ['measured', fmtUs(l.meas)],
          ['unit', l.unit], ['bound', l.bound]]);
      }},
      series: [{type: 'graph', layout: 'none', roam: true, data: nodes, links: links, label: {show: false},
        edgeSymbol: ['none', 'arrow'], edgeSymbolSize: 4, lineStyle: {color: '#aab2bf', width: 0.8, opacity: 0.8},
        emphasis: {focus: 'adjacency', label: {show: true, position: 'right', formatter: '{b}'}}}]
    }));
    chart.on('click', function (p) { if (p.dataType === 'node') selectLayer(Number(p.data.id)); });
  }

  // ------------------------------------------------------------------ experiments
  function renderExperiments() {
    var panel = document.getElementById('panel-experiments');
    panel.addEventListener('click', function (ev) {
      var link = ev.target.closest('a[data-layer]');
      if (!link) return;
      ev.preventDefault();
      selectLayer(Number(link.dataset.layer));
    });
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
  showTab(first);
  document.documentElement.dataset.ready = '1';
  window.layerscopeReport = {charts: charts, showTab: showTab, selectLayer: selectLayer};
})();
