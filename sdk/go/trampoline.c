/* The C side of sink callbacks: libconflux calls cxgo_on_event on its progress thread with
 * the sink's cgo.Handle as its argument; it hands the event to the exported Go function.
 * (A Go file with //export may not define C functions in its preamble, hence this file.) */
#include "conflux.h"
#include "_cgo_export.h"

static void cxgo_on_event(void *arg, const struct cx_chan_event *ev)
{
    confluxGoOnEvent((uintptr_t)arg, (struct cx_chan_event *)ev);
}

int cxgo_sink(struct cx_chan *ch, const struct cx_chan_sink_opts *o, uintptr_t handle,
              struct cx_chan_sink **out)
{
    return cx_chan_sink(ch, o, cxgo_on_event, (void *)handle, out);
}
