// git brat ui: live redraws, streamed session logs, and actions posted with the CSRF token.
// Everything from the server is either its escaped HTML or text set through textContent.
"use strict";

(function () {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const liveDot = document.getElementById("live");

  // Redraw each live section of this page from a fresh copy of it; forms sit outside them,
  // so what you are typing survives.
  let redrawing = false, again = false;
  async function redraw() {
    if (redrawing) { again = true; return; }
    redrawing = true;
    try {
      const resp = await fetch(location.href, {credentials: "same-origin"});
      if (resp.ok) {
        const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
        for (const fresh of doc.querySelectorAll("section[data-live][id]")) {
          const here = document.getElementById(fresh.id);
          if (here && here.innerHTML !== fresh.innerHTML) here.innerHTML = fresh.innerHTML;
        }
        wireNotes();
        startLogs();
        document.body.dataset.version = String(Number(document.body.dataset.version || 0) + 1);
      }
    } finally {
      redrawing = false;
      if (again) { again = false; redraw(); }
    }
  }

  const events = new EventSource("/events");
  events.addEventListener("change", redraw);
  events.onopen = () => { liveDot.className = "on"; };
  events.onerror = () => { liveDot.className = "off"; };

  // Session logs stream as they grow.
  const streams = new Map();
  function startLogs() {
    for (const pre of document.querySelectorAll("pre[data-log]")) {
      const sid = pre.dataset.log;
      if (streams.has(sid)) {
        const old = streams.get(sid);
        if (old.pre !== pre) {
          pre.textContent = old.pre.textContent;
          pre.className = old.pre.className;
          old.pre = pre;
        }
        continue;
      }
      const src = new EventSource(`/api/v1/sessions/${encodeURIComponent(sid)}/log/stream?from=0`);
      const entry = {src, pre};
      streams.set(sid, entry);
      src.onmessage = (ev) => {
        const chunk = JSON.parse(ev.data);
        entry.pre.appendChild(document.createTextNode(chunk.text));
        entry.pre.dataset.offset = String(chunk.offset);
        entry.pre.scrollTop = entry.pre.scrollHeight;
      };
      src.addEventListener("end", () => { src.close(); entry.pre.classList.add("ended"); });
    }
  }

  // Comments on diff lines become part of the reply.
  function wireNotes() {
    for (const btn of document.querySelectorAll("button.note")) {
      if (btn.dataset.wired) continue;
      btn.dataset.wired = "1";
      btn.addEventListener("click", () => {
        const list = document.querySelector("form.reply ul.notes");
        if (!list) return;
        const li = document.createElement("li");
        const label = document.createElement("span");
        label.textContent = `${btn.dataset.path}:${btn.dataset.line} `;
        const input = document.createElement("input");
        input.name = "note";
        input.dataset.path = btn.dataset.path;
        input.dataset.line = btn.dataset.line;
        input.placeholder = "your comment on this line";
        li.append(label, input);
        list.appendChild(li);
        input.focus();
      });
    }
  }

  function show(form, text, ok) {
    let out = form.closest(".actions")?.querySelector("output[data-result]");
    if (!out) {
      out = document.createElement("output");
      form.after(out);
    }
    if (out) { out.textContent = text; out.className = ok ? "ok" : "error"; }
  }

  function planView(plan) {
    const box = document.getElementById("plan");
    box.replaceChildren();
    const p = document.createElement("p");
    p.textContent = `plan: convoy "${plan.title}", ${plan.tasks.length} task(s)`;
    const ul = document.createElement("ul");
    for (const t of plan.tasks) {
      const li = document.createElement("li");
      li.textContent = `p${t.priority}  ${t.title}` + (t.needs.length ? `  (needs ${t.needs.join(", ")})` : "");
      ul.appendChild(li);
    }
    box.append(p, ul);
    for (const [what, label] of [["confirm", "confirm: create it"], ["discard", "discard"]]) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = what;
      b.textContent = label;
      b.addEventListener("click", async () => {
        const r = await post(`/api/v1/mayor/${what}`, {exchange: String(plan.exchange)});
        box.replaceChildren();
        const msg = document.createElement("p");
        msg.textContent = r.ok ? (what === "confirm" ? `created convoy ${(r.body.convoy || "").slice(0, 7)}` : "discarded")
          : r.body.error;
        box.appendChild(msg);
      });
      box.appendChild(b);
    }
  }

  async function post(url, body) {
    const resp = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify(body),
    });
    let parsed = {};
    try { parsed = await resp.json(); } catch (e) { parsed = {error: `HTTP ${resp.status}`}; }
    return {ok: resp.ok, body: parsed};
  }

  document.addEventListener("submit", async (ev) => {
    const form = ev.target.closest("form[data-action]");
    if (!form) return;
    ev.preventDefault();
    const body = {};
    for (const el of form.querySelectorAll("input[name], textarea[name], select[name]")) {
      if (el.name !== "note") body[el.name] = el.value;
    }
    const notes = [...form.querySelectorAll('input[name="note"]')]
      .map((el) => ({path: el.dataset.path, line: el.dataset.line, text: el.value}))
      .filter((n) => n.text.trim());
    if (notes.length) body.notes = notes;
    const button = form.querySelector("button");
    button.disabled = true;
    try {
      const r = await post(form.dataset.action, body);
      if (r.ok && form.dataset.action === "/api/v1/mayor/ask") {
        planView(r.body);
        show(form, "the mayor answered: confirm or discard the plan", true);
      } else {
        show(form, r.ok ? "done" : r.body.error, r.ok);
      }
      if (r.ok) {
        for (const el of form.querySelectorAll("textarea, input")) el.value = "";
        form.querySelector("ul.notes")?.replaceChildren();
        redraw();
      }
    } finally {
      button.disabled = false;
    }
  });

  wireNotes();
  startLogs();
})();
