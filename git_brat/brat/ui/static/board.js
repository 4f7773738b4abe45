// git brat ui: live redraws, streamed session logs, and actions posted with the CSRF token.
// Everything from the server is either its escaped HTML or text set through textContent.
// The script acts only on forms and buttons carrying the nonce of the render they came in:
// markup that slipped into a page from the log cannot know it, so it is never posted.
"use strict";

(function () {
  const CSRF_KEY = "brat-csrf";
  // The board's pages live under a secret root, the path its cookie is scoped to (other
  // ports of 127.0.0.1 would otherwise be sent it); every address the script uses starts there.
  const ROOT = document.body.dataset.root || "";
  const below = (url) => url.startsWith(ROOT + "/") ? url.slice(ROOT.length) : url;
  // The token's visit leaves the CSRF token in the fragment (no server ever sees it); it is
  // kept in this origin's storage, which no other port of 127.0.0.1 can read.
  // Only from the board's own redirect: a link from elsewhere carrying a fragment of its
  // choosing would otherwise replace the token kept.
  const arrival = performance.getEntriesByType("navigation")[0];
  const fragment = arrival && arrival.redirectCount > 0
    ? /^#brat-csrf=([0-9a-f]{64})$/.exec(location.hash) : null;
  if (fragment) {
    try { localStorage.setItem(CSRF_KEY, fragment[1]); } catch (e) { /* storage off: this page only */ }
  }
  if (location.hash.startsWith("#brat-csrf=")) {
    history.replaceState(null, "", location.pathname + location.search);
  }
  let stored = null;
  try { stored = localStorage.getItem(CSRF_KEY); } catch (e) { /* storage off */ }
  const csrf = fragment ? fragment[1] : (stored || "");
  const renderOf = (doc) => doc.head.querySelector('meta[name="brat-render"]')?.content || "";
  const nonce = renderOf(document);
  const rendered = (el) => nonce !== "" && el.dataset.nonce === nonce;
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
        // What the fresh render made carries its nonce: it becomes this page's; anything
        // else loses the marks the script acts on.
        const freshNonce = renderOf(doc);
        for (const el of doc.querySelectorAll("[data-action], [data-nonce], [data-log]")) {
          if (freshNonce !== "" && el.dataset.nonce === freshNonce) el.dataset.nonce = nonce;
          else { delete el.dataset.action; delete el.dataset.nonce; delete el.dataset.log; }
        }
        const drafts = keepDrafts(), typed = keepTyped();
        for (const fresh of doc.querySelectorAll("#main section[data-live][id]")) {
          const here = document.getElementById(fresh.id);
          if (here && here.innerHTML !== fresh.innerHTML) here.innerHTML = fresh.innerHTML;
        }
        restoreDrafts(drafts);
        restoreTyped(typed);
        // What waits on you: counted on "Needs you" and in the title, on every page.
        // (A page drawn before the count was worked out leaves the last one shown.)
        const count = doc.getElementById("needs-count"), here = document.getElementById("needs-count");
        if (count && here && count.textContent !== "") {
          here.textContent = count.textContent;
          document.title = doc.title;
          needsNow(count);
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

  // Browser notifications (opted in with the header's button): raised when what needs you
  // grows, naming what is new; never for what this page's own actions caused.
  const NOTIFY_KEY = "brat-notify";
  const OWN_FOR_MS = 120000;   // a task this page acted on: what it then needs is this page's doing
  const ownActions = new Map();   // task id -> when this page acted on it
  const notifyButton = document.getElementById("notify");
  const needsOf = (badge) => {
    try { return JSON.parse(badge.dataset.what || "[]"); } catch (e) { return []; }
  };
  const countOf = (badge) => (badge.textContent === "" ? null : Number(badge.textContent));
  const firstBadge = document.getElementById("needs-count");
  let needsSeen = new Set(firstBadge ? needsOf(firstBadge).map((n) => n[0]) : []);
  let needsCount = firstBadge ? countOf(firstBadge) : null;

  function notifying() {
    let wanted = null;
    try { wanted = localStorage.getItem(NOTIFY_KEY); } catch (e) { /* storage off */ }
    return wanted === "on" && "Notification" in window && Notification.permission === "granted";
  }

  function showNotifyState() {
    if (!notifyButton || !("Notification" in window)) return;
    notifyButton.hidden = false;
    notifyButton.textContent = Notification.permission === "denied" ? "notifications blocked"
      : notifying() ? "notifications on" : "notify me";
  }

  notifyButton?.addEventListener("click", async () => {
    if (notifying()) {
      try { localStorage.setItem(NOTIFY_KEY, "off"); } catch (e) { /* storage off */ }
    } else if (await Notification.requestPermission() === "granted") {
      try { localStorage.setItem(NOTIFY_KEY, "on"); } catch (e) { /* storage off */ }
    }
    showNotifyState();
  });

  function ownDoing(key) {
    const task = key.slice(key.indexOf(":") + 1), when = ownActions.get(task);
    return when !== undefined && Date.now() - when < OWN_FOR_MS;
  }

  function needsNow(badge) {
    const items = needsOf(badge), count = countOf(badge);
    const fresh = items.filter((n) => !needsSeen.has(n[0]) && !ownDoing(n[0]));
    const grew = count !== null && needsCount !== null && count > needsCount;
    needsSeen = new Set(items.map((n) => n[0]));
    needsCount = count;
    if (!grew || !fresh.length || !notifying()) return;
    const more = fresh.length > 3 ? `\nand ${fresh.length - 3} more` : "";
    new Notification(`git brat: ${count} need${count === 1 ? "s" : ""} you`, {
      body: fresh.slice(0, 3).map((n) => n[1]).join("\n") + more, tag: "brat-needs-you",
    });
  }

  showNotifyState();

  const events = new EventSource(`${ROOT}/events`);
  events.addEventListener("change", redraw);
  // What changed while no stream was open is never sent: a reconnect redraws, and so does the
  // first open of a page drawn before its count was known (the count may have landed before
  // this stream began, and then no change would ever come for it).
  let opened = false;
  events.onopen = () => {
    liveDot.className = "on";
    const count = document.getElementById("needs-count");
    if (opened || (count && count.textContent === "")) redraw();
    opened = true;
  };
  events.onerror = () => { liveDot.className = "off"; };

  // Session logs stream as they grow.
  const streams = new Map();
  function startLogs() {
    for (const pre of document.querySelectorAll("pre[data-log]")) {
      if (!rendered(pre)) continue;
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
      const src = new EventSource(`${ROOT}/api/v1/sessions/${encodeURIComponent(sid)}/log/stream?from=0`);
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

  // Notes on diff lines: each opens under the line it is about, and goes with the reply.
  function noteRow(path, line, text) {
    const tr = document.createElement("tr");
    tr.className = "note-row note-draft";
    const td = document.createElement("td");
    td.colSpan = 2;
    const label = document.createElement("span");
    label.textContent = `${path}:${line} `;
    const input = document.createElement("input");
    input.name = "note";
    input.dataset.path = path;
    input.dataset.line = line;
    input.placeholder = "your note on this line (sent with the reply)";
    input.value = text || "";
    td.append(label, input);
    tr.append(td);
    return tr;
  }

  function lineRow(path, line) {
    for (const btn of document.querySelectorAll("button.note")) {
      if (btn.dataset.path === path && btn.dataset.line === line && rendered(btn)) return btn.closest("tr");
    }
    return null;
  }

  // A redraw of the diff keeps the notes being written, each at its line.
  function keepDrafts() {
    return [...document.querySelectorAll("tr.note-draft input[name=note]")]
      .map((el) => ({path: el.dataset.path, line: el.dataset.line, text: el.value}));
  }

  function restoreDrafts(drafts) {
    for (const d of drafts) {
      const already = [...document.querySelectorAll("tr.note-draft input[name=note]")]
        .some((el) => el.dataset.path === d.path && el.dataset.line === d.line);
      const row = lineRow(d.path, d.line);
      if (!already && row) row.after(noteRow(d.path, d.line, d.text));
    }
  }

  // A decision's form redraws with the task (only legal actions show): what is typed in it
  // survives, in the same action's field, while that action is still offered.
  function typedKey(el) {
    const form = el.closest("section[data-live] form[data-action]");
    return form && el.name && el.name !== "note" ? `${form.dataset.action}\n${el.name}` : null;
  }

  function keepTyped() {
    const kept = new Map();
    for (const el of document.querySelectorAll("section[data-live] form[data-action] :is(input, textarea)")) {
      const key = typedKey(el);
      if (key && el.type !== "hidden" && el.value) kept.set(key, el.value);
    }
    return kept;
  }

  function restoreTyped(kept) {
    for (const el of document.querySelectorAll("section[data-live] form[data-action] :is(input, textarea)")) {
      const key = typedKey(el);
      if (key && kept.has(key) && !el.value) el.value = kept.get(key);
    }
  }

  function wireNotes() {
    for (const btn of document.querySelectorAll("button.note")) {
      if (btn.dataset.wired || !rendered(btn)) continue;
      btn.dataset.wired = "1";
      btn.addEventListener("click", () => {
        const row = btn.closest("tr");
        const next = row.nextElementSibling;
        if (next && next.classList.contains("note-draft")) { next.querySelector("input").focus(); return; }
        const tr = noteRow(btn.dataset.path, btn.dataset.line, "");
        row.after(tr);
        tr.querySelector("input").focus();
      });
    }
  }

  // Where a form's result is shown, found before it is posted: the write it makes redraws
  // the live section the form sits in, and a form replaced mid-post has no place of its own.
  function resultBox(form) {
    let out = form.closest(".actions")?.querySelector("output[data-result]");
    if (!out) {
      out = document.createElement("output");
      form.after(out);
    }
    return out;
  }

  function show(where, text, ok) {
    const out = where instanceof HTMLFormElement ? resultBox(where) : where;
    out.textContent = text;
    out.className = ok ? "ok" : "error";
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
        const r = await post(`${ROOT}/api/v1/mayor/${what}`, {exchange: String(plan.exchange)});
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
    if (!rendered(form)) return;   // not a form the server rendered: never posted
    if (!csrf) {
      show(form, "open the address `git brat ui` printed (it gives this browser the right to act)", false);
      return;
    }
    const body = {};
    for (const el of form.querySelectorAll("input[name], textarea[name], select[name]")) {
      if (el.name !== "note") body[el.name] = el.value;
    }
    const notes = [...(form.classList.contains("reply") ? document : form).querySelectorAll('input[name="note"]')]
      .map((el) => ({path: el.dataset.path, line: el.dataset.line, text: el.value}))
      .filter((n) => n.text.trim());
    if (notes.length) body.notes = notes;
    const button = form.querySelector("button");
    const out = resultBox(form);
    button.disabled = true;
    const acted = /^\/api\/v1\/tasks\/([0-9a-f]+)\//.exec(below(form.dataset.action));
    if (acted) ownActions.set(acted[1], Date.now());   // (before the post: its redraw may come first)
    try {
      const r = await post(form.dataset.action, body);
      if (r.ok && below(form.dataset.action) === "/api/v1/mayor/ask") {
        planView(r.body);
        show(out, "the mayor answered: confirm or discard the plan", true);
      } else {
        const made = form.matches(".new-task, .new-convoy") && r.body.id;
        show(out, r.ok ? (made ? `created ${String(r.body.id).slice(0, 7)}` : "done") : r.body.error, r.ok);
      }
      if (r.ok) {
        for (const el of form.querySelectorAll("textarea, input")) el.value = "";
        form.querySelector("ul.notes")?.replaceChildren();
        if (form.classList.contains("reply")) for (const tr of document.querySelectorAll("tr.note-draft")) tr.remove();
        redraw();
      }
    } finally {
      button.disabled = false;
    }
  });

  wireNotes();
  startLogs();
})();
