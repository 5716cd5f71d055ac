// The attnkit head atlas, offline: reads the JSON inlined in #atlas-data, draws the scatter with the inlined
// vega-embed, and builds each head's card on demand. Every text taken from the data (token pieces, model and
// file names) is set with textContent, never parsed as HTML.
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("atlas-data").textContent);
  const state = {lang: "en", x: "previous-token", y: "induction", colour: "verdict", role: "induction", no0: false};
  const app = document.getElementById("app");
  let view = null;

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") e.textContent = v; else if (k === "cls") e.className = v; else e.setAttribute(k, v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  const S = () => D.strings[state.lang];
  const tr = (v) => (v && typeof v === "object" && !Array.isArray(v)) ? (v[state.lang] ?? v.en ?? "") : (v ?? "");
  const num = (x, d = 3) => (x === null || x === undefined || Number.isNaN(x)) ? "—" : Number(x).toFixed(d);
  const col = (name) => state.no0 && name !== "first-token" && name !== "effect" ? name + D.no0 : name;
  const colours = {"pattern and effect": "#2ca02c", "pattern only": "#ff7f0e", "effect only": "#1f77b4", "neither": "#999"};

  function rows() {
    return D.index.map((r) => {
      const verdict = r["verdict: " + state.role] || "neither";   // the spec colours by `shown`: the reader's words
      return Object.assign({}, r, {verdict: verdict, shown: S().labels[verdict] || verdict,
        __x: r[col(state.x)], __y: r[col(state.y)]});
    });
  }

  function spec() {
    const s = JSON.parse(JSON.stringify(D.specs[state.lang][state.colour]));
    delete s.datasets;
    s.data = {values: rows()};
    const X = col(state.x), Y = col(state.y);
    s.encoding.x.field = "__x"; s.encoding.x.title = S().axes[X] || X;
    s.encoding.y.field = "__y"; s.encoding.y.title = S().axes[Y] || Y;
    s.encoding.tooltip[1].field = "__x"; s.encoding.tooltip[1].title = S().axes[X] || X;
    s.encoding.tooltip[2].field = "__y"; s.encoding.tooltip[2].title = S().axes[Y] || Y;
    return s;
  }

  function draw() {
    const target = document.getElementById("scatter");
    if (view) { view.finalize(); view = null; }
    vegaEmbed(target, spec(), {actions: false, renderer: "svg"}).then((res) => {
      view = res.view;
      view.addEventListener("click", (ev, item) => { if (item && item.datum && item.datum.head) openCard(item.datum.head); });
    }).catch((err) => { target.textContent = String(err); });
  }

  function select(label, key, options) {
    const s = el("select", {"data-key": key});
    for (const [value, text] of options) {
      const o = el("option", {value: value, text: text});
      if (value === state[key]) o.selected = true;
      s.append(o);
    }
    s.addEventListener("change", () => { state[key] = s.value; draw(); });
    return el("label", {}, label + " ", s);
  }

  function controls() {
    const axes = [...D.columns.filter((c) => !c.endsWith(D.no0)), "effect"].map((c) => [c, S().roles[c] || c]);
    const box = el("input", {type: "checkbox", id: "no0"});
    box.checked = state.no0;
    box.addEventListener("change", () => { state.no0 = box.checked; draw(); });
    return el("div", {cls: "controls"}, select(S().x, "x", axes), select(S().y, "y", axes),
      select(S().colour, "colour", [["verdict", S().verdict], ["layer", S().layer]]),
      select(S().role, "role", D.roles.map((r) => [r, S().roles[r] || r])),
      el("label", {}, box, " " + S().no0));
  }

  function header() {
    const i = D.info, m = i.model || {}, c = i.corpus || {}, e = i.effect || {};
    const langs = el("span", {cls: "lang"});
    for (const [code, name] of [["en", "English"], ["zh", "简体中文"]]) {
      const b = el("button", {text: name, "data-lang": code, cls: code === state.lang ? "on" : ""});
      b.addEventListener("click", () => { state.lang = code; document.documentElement.lang = code; build(); });
      langs.append(b);
    }
    const line = `${S().model}: ${m.name} (sha256 ${String(m.sha256 || "—").slice(0, 12)}) · ${S().corpus}: ${c.name} ` +
      `(${S().documents}: ${c.documents}, ${i.tokens} ${S().tokens}) · ${S().effect_sample} ${e.tokens} ${S().tokens} · ` +
      `${S().f64}, ${S().ok}: ${i.float64 && i.float64.ok ? S().yes : S().no}`;
    return el("header", {}, el("h1", {text: S().title}, langs), el("div", {cls: "meta", text: line}));
  }

  function build() {
    app.replaceChildren();
    app.append(header());
    const left = el("div", {id: "left"}, controls(), el("div", {id: "scatter"}), el("div", {cls: "meta", text: S().card_hint}));
    const cards = el("div", {id: "cards"});
    for (const h of D.heads) cards.append(cardShell(h));
    app.append(el("main", {}, left, cards));
    draw();
  }

  function cardShell(h) {
    const d = el("details", {cls: "card", id: "head-" + h.head, "data-head": h.head});
    const sum = el("summary", {text: h.head});
    const held = h.roles.filter((r) => r.pattern);
    for (const r of held) {
      sum.append(el("span", {cls: "badge", style: "background:" + colours[r.verdict],
        text: (S().roles[r.role] || r.role) + ": " + (S().labels[r.verdict] || r.verdict)}));
    }
    if (!held.length) {
      const v = h.effect.direction === "raises" ? "effect only" : "neither";
      sum.append(el("span", {cls: "badge", style: "background:" + colours[v], text: S().labels[v] || v}));
    }
    if (h.effect.direction === "lowers") sum.append(el("span", {cls: "badge", style: "background:#7f7f7f", text: S().lowers}));
    d.append(sum);
    d.addEventListener("toggle", () => { if (d.open && !d.dataset.built) { d.dataset.built = "1"; d.append(cardBody(h)); } });
    return d;
  }

  function openCard(name) {
    const d = document.getElementById("head-" + name);
    if (!d) return;
    d.open = true;
    d.scrollIntoView({block: "start"});
  }

  function table(head, body) {
    const t = el("table");
    t.append(el("tr", {}, ...head.map((x) => el("th", {text: x}))));
    for (const r of body) t.append(el("tr", {}, ...r.map((x) => (x instanceof Node ? el("td", {}, x) : el("td", {text: String(x)})))));
    return t;
  }

  function cardBody(h) {
    const s = S(), e = h.effect;
    const body = el("div");
    body.append(el("p", {cls: "text", text: tr(h.summary)}));
    for (const g of h.redundancy || []) body.append(el("p", {cls: "text", text: tr(g.text)}));
    body.append(table([s.role_col, s.score, s.threshold, s.pattern, s.effect_col, s.verdict],
      h.roles.map((r) => [s.roles[r.role] || r.role, num(r.score), r.threshold, r.pattern ? s.yes : s.no,
        r.effect ? s.yes : s.no, s.labels[r.verdict] || r.verdict])));
    body.append(el("h4", {text: s.effect}));
    body.append(el("div", {text: `${num(e.value, 4)} [${num(e.low, 4)}, ${num(e.high, 4)}] · ${s[e.direction] || e.direction}`}));
    body.append(statsTable(h));
    body.append(examples(h));
    body.append(el("h4", {text: s.pairs}));
    body.append(table([s.query, s.key, s.count, s.mass], h.pairs.map((p) => [tok(p.query), tok(p.key), p.count, num(p.mass, 2)])));
    body.append(qkView(h));
    const f = h.float64;
    body.append(el("h4", {text: s.f64}));
    body.append(el("div", {text: `${s.f64_line}: ${f.windows} · ${s.max_error}: ${Number(f.max_error).toExponential(2)} · ` +
      `${s.tolerance}: ${f.tolerance} · ${s.ok}: ${f.ok ? s.yes : s.no}`}));
    return body;
  }

  function statsTable(h) {
    const s = S();
    const names = D.columns.filter((c) => state.no0 ? (c.endsWith(D.no0) || c === "first-token") : !c.endsWith(D.no0));
    return table([s.statistic, s.mean, s.interval, s.quantiles, s.windows, ""], names.map((c) => {
      const v = h.statistics[c] || {}, q = v.quantiles || {}, hist = v.histogram;
      return [s.axes[c] || c, num(v.mean), `${num(v.low)} … ${num(v.high)}`, `${num(q.p5)} · ${num(q.p50)} · ${num(q.p95)}`,
        v.windows, histogram(hist)];
    }));
  }

  function histogram(hist) {
    const box = el("span");
    if (!hist) return box;
    const top = Math.max(1, ...hist.counts);
    for (const c of hist.counts) box.append(el("span", {cls: "bar", style: `width:3px;height:${2 + 12 * c / top}px;margin-right:1px`}));
    return box;
  }

  function tok(text, cls, weight) {
    const span = el("span", {cls: "tok" + (cls ? " " + cls : ""), text: String(text).replace(/\n/g, "⏎")});
    if (weight !== undefined) span.style.background = `rgba(31,119,180,${Math.min(1, 0.15 + weight)})`;
    return span;
  }

  function example(x) {
    const line = el("div", {cls: "ex"});
    const keyAt = new Map(x.keys.map((k) => [k.pos, k.weight]));
    x.pieces.forEach((p, i) => {
      const pos = x.start + i;
      line.append(tok(p, pos === x.pos ? "q" : "", keyAt.has(pos) ? keyAt.get(pos) : undefined));
    });
    for (const k of x.keys) if (k.pos < x.start) {
      line.append(el("span", {text: "  … "}));
      k.pieces.forEach((p, i) => line.append(tok(p, "", k.start + i === k.pos ? k.weight : undefined)));
    }
    line.append(el("span", {cls: "meta", text: `  ${S().activation} ${num(x.act, 2)}`}));
    return line;
  }

  function examples(h) {
    const box = el("div", {}, el("h4", {text: S().examples}));
    for (const d of h.deciles) {
      box.append(el("div", {cls: "meta", text: `${S().decile} ${d.decile} (${S().activation} ${num(d.low, 2)} – ${num(d.high, 2)})`}));
      for (const x of d.examples) box.append(example(x));
    }
    return box;
  }

  function qkView(h) {
    const box = el("div", {}, el("h4", {text: S().qk}));
    const target = el("div");
    box.append(target);
    if (!h.qk.points.length) return box;
    const s = JSON.parse(JSON.stringify(D.specs[state.lang].qk));
    delete s.datasets;
    const shown = {query: S().query, key: S().key};
    s.data = {values: h.qk.points.map((p) => Object.assign({}, p, {shown: shown[p.kind]}))};
    s.encoding.color.scale.domain = [shown.query, shown.key];
    const ex = h.qk.explained.map((v) => (v === null ? "—" : Math.round(100 * v) + "%"));
    s.encoding.x.title = S().axis.replace("{n}", "1").replace("{share}", ex[0]);
    s.encoding.y.title = S().axis.replace("{n}", "2").replace("{share}", ex[1]);
    vegaEmbed(target, s, {actions: false, renderer: "svg"}).catch((err) => { target.textContent = String(err); });
    return box;
  }

  build();
})();
