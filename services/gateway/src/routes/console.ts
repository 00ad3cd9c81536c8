/** A minimal web console: list tasks, submit one, watch its events live, approve or answer requests. */
import { EVENT_TYPES } from '@baton/domain';

export const CONSOLE_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Baton</title>
<style>
 body{font:14px/1.4 system-ui,sans-serif;margin:2rem;max-width:1100px;color:#222}
 h1{margin:0 0 1rem} textarea{width:100%;height:4rem} .row{display:flex;gap:2rem}
 .col{flex:1;min-width:0} table{border-collapse:collapse;width:100%} td,th{border-bottom:1px solid #ddd;padding:4px;text-align:left}
 tr:hover{background:#f5f5f5;cursor:pointer} pre{background:#f6f8fa;padding:.5rem;max-height:26rem;overflow:auto;font-size:12px}
 .req{border:1px solid #e3b341;background:#fffbea;padding:.5rem;margin:.5rem 0} button{margin-right:.3rem}
</style></head><body>
<h1>Baton</h1>
<div class="row"><div class="col">
<form id="f"><textarea id="prompt" placeholder="Research X and write a report"></textarea><br>
<label><input type="checkbox" id="approve" checked> require plan approval</label> <button>Submit</button></form>
<h3>Tasks</h3><table><thead><tr><th>status</th><th>prompt</th><th>updated</th></tr></thead><tbody id="tasks"></tbody></table>
</div><div class="col"><h3 id="title">Select a task</h3><div id="reqs"></div><pre id="events"></pre></div></div>
<script>
const key = new URLSearchParams(location.search).get('key');
const H = Object.assign({'content-type':'application/json'}, key ? {authorization:'Bearer '+key} : {});
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
async function list(){ const r = await fetch('/v1/tasks?limit=30',{headers:H}); const j = await r.json();
  $('tasks').innerHTML = (j.items||[]).map(t => '<tr data-id="'+t.id+'"><td>'+esc(t.status)+'</td><td>'+esc(t.prompt.slice(0,80))+'</td><td>'+esc(t.updatedAt.slice(11,19))+'</td></tr>').join('');
  for (const tr of $('tasks').children) tr.onclick = () => open(tr.dataset.id); }
let es;
async function open(id){ if (es) es.close(); $('events').textContent=''; $('title').textContent = id; await showTask(id);
  if (key) { $('events').textContent = '(live view needs an open gateway; polling)'; return; }
  es = new EventSource('/v1/tasks/'+id+'/events');
  es.onmessage = es.onerror = null;
  es.addEventListener('error', () => {});
  const on = (e) => { const ev = JSON.parse(e.data); $('events').textContent += ev.position+'  '+ev.type+'\\n'; showTask(id); list(); };
  for (const t of ${JSON.stringify(EVENT_TYPES)}) es.addEventListener(t, on); }
async function showTask(id){ const t = await (await fetch('/v1/tasks/'+id,{headers:H})).json();
  const plan = t.plan ? '<div><b>plan</b> ('+esc(t.plan.status)+(t.lead? ', lead '+esc(t.lead.phase):'')+'): '+esc(t.plan.summary)+'<ul>'+t.plan.subtasks.map(x => '<li>'+esc(x.id)+' ['+esc(x.agent)+'] <b>'+esc(x.status)+'</b> locks '+esc(x.fileLocks.join(', '))+(x.tests? ' · tests '+x.tests.passed+' passed, '+x.tests.failed+' failed':'')+'</li>').join('')+'</ul>'+t.plan.reviews.map(v => '<div>review (round '+v.round+'): <b>'+esc(v.verdict)+'</b> '+esc(v.summary)+'<ul>'+v.issues.map(i => '<li>['+esc(i.severity)+'] '+esc((i.file||'')+(i.line? ':'+i.line:''))+' '+esc(i.message)+'</li>').join('')+'</ul></div>').join('')+(t.workspace? '<a target="_blank" href="/v1/tasks/'+id+'/diff">diff</a>':'')+'</div>' : '';
  $('reqs').innerHTML = plan+'<b>'+esc(t.status)+'</b> '+(t.result? esc(t.result.summary):'')+((t.artifacts||[]).length? '<div>artifacts: '+t.artifacts.map(a => '<a target="_blank" href="/v1/tasks/'+id+'/artifacts/'+a.path.split('/').map(encodeURIComponent).join('/')+'">'+esc(a.path)+'</a>').join(' · ')+'</div>':'')+(t.pendingRequests||[]).map(r => '<div class="req"><b>'+r.kind+'</b> from '+esc(r.agentId)+': '+esc(r.plan||r.questions?.join(' ')||'')+(r.options? ' <i>('+esc(r.options.join(' | '))+')</i>':'')+'<br>'+
   (r.kind==='budget' ? 'spent '+esc(JSON.stringify(r.spent))+' of '+esc(JSON.stringify(r.limit))+' <button onclick="raise(\\''+id+'\\',\\''+r.requestId+'\\')">Raise ×2</button><button onclick="decide(\\''+id+'\\',\\''+r.requestId+'\\',\\'reject\\')">Stop</button>'
    : r.kind==='approval' ? '<button onclick="decide(\\''+id+'\\',\\''+r.requestId+'\\',\\'approve\\')">Approve</button><button onclick="decide(\\''+id+'\\',\\''+r.requestId+'\\',\\'reject\\')">Reject</button>'
    : '<input id="ans-'+esc(r.requestId)+'"><button onclick="answer(\\''+id+'\\',\\''+r.requestId+'\\')">Answer</button>')+'</div>').join(''); }
async function decide(id, rid, decision){ await fetch('/v1/tasks/'+id+'/approvals/'+rid,{method:'POST',headers:H,body:JSON.stringify({decision})}); showTask(id); }
async function raise(id, rid){ const t = await (await fetch('/v1/tasks/'+id,{headers:H})).json(); const r = t.pendingRequests.find(x => x.requestId===rid); const b = {};
  if (r.limit.usd!==null) b.usd = 2*Math.max(r.limit.usd, t.budget.spent.usd); if (r.limit.tokens!==null) b.tokens = 2*Math.max(r.limit.tokens, t.budget.spent.tokens);
  const res = await fetch('/v1/tasks/'+id+'/approvals/'+rid,{method:'POST',headers:H,body:JSON.stringify({decision:'approve',budget:b})}); if (!res.ok) alert((await res.json()).error.message); showTask(id); }
async function answer(id, rid){ await fetch('/v1/tasks/'+id+'/answers/'+rid,{method:'POST',headers:H,body:JSON.stringify({answers:$('ans-'+rid).value})}); showTask(id); }
$('f').onsubmit = async (e) => { e.preventDefault(); const r = await fetch('/v1/tasks',{method:'POST',headers:H,body:JSON.stringify({prompt:$('prompt').value, requirePlanApproval:$('approve').checked})});
  const t = await r.json(); if (t.id) { list(); open(t.id); } else alert(JSON.stringify(t)); };
list(); setInterval(list, 5000);
</script></body></html>`;
