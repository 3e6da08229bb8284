package httpapi

import "net/http"

// dashboard is a one-page view of the federation: it polls /v1/regions.
func dashboard(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(dashboardHTML))
}

const dashboardHTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>ax</title>
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin-bottom:1.5em}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child,td:nth-child(2){text-align:left}
.bad{color:#b00}.ok{color:#070}.bar{display:inline-block;height:8px;background:#48c;vertical-align:middle}
</style></head><body>
<h1>ax</h1><p id="meta">loading…</p><div id="regions"></div>
<script>
async function tick(){
  try{
    const r=await fetch('/v1/regions');const d=await r.json();
    document.getElementById('meta').textContent=(d.global_view?'global view current':'global etcd unreachable: last known view')+' · '+new Date().toLocaleTimeString();
    let h='';
    for(const g of d.regions){
      h+='<h2>'+g.name+' <small class="'+(g.healthy?'ok':'bad')+'">'+(g.healthy?'healthy':'unhealthy')+'</small></h2>';
      h+='<p>leader '+g.leader+' · '+g.api+'</p><table><tr><th>pool</th><th>tags</th><th>workers</th><th>slots</th><th>running</th><th>ready</th><th>fill</th><th>$/slot-h</th></tr>';
      for(const p of g.pools||[]){
        const tags=Object.entries(p.tags||{}).map(e=>e.join('=')).join(', ');
        h+='<tr><td>'+p.name+(p.spot?' (spot)':'')+'</td><td>'+tags+'</td><td>'+p.workers+'</td><td>'+p.slots+'</td><td>'+p.running+'</td><td>'+p.ready+'</td><td><span class="bar" style="width:'+Math.min(100,Math.round(p.queue_fill*100))+'px"></span> '+(p.queue_fill*100).toFixed(1)+'%</td><td>'+p.price_per_slot_hour.toFixed(4)+'</td></tr>';
      }
      h+='</table>';
    }
    document.getElementById('regions').innerHTML=h;
  }catch(e){document.getElementById('meta').textContent='error: '+e}
}
tick();setInterval(tick,1000);
</script></body></html>`
