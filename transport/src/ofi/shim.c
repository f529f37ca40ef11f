/* The libfabric calls of symmem's ofi transport, behind a small C interface: libfabric's
 * API is mostly static inline functions over provider ops tables, which Rust cannot call
 * directly. Every function returns 0 or a negative libfabric error code (-FI_E*), and
 * fills `err` (when given) with what failed and the provider's message. No function
 * blocks: the Rust side waits, with backoff, by polling. */

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct symmem_ofi {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *heap_mr;
	struct fid_mr *bounce_mr;
	fi_addr_t *peers;
	size_t n_peers;
	/* Non-fetching atomics are issued as fetching ones (see symmem_ofi_atomic). */
	int fetch_for_update;
	/* FI_DELIVERY_COMPLETE when the endpoint completes at delivery, else 0: the completion
	 * level the *_ex calls (which pass their flags explicitly) ask for. */
	uint64_t delivery;
};

/* What the endpoint was opened with, for the Rust side. */
struct symmem_ofi_attrs {
	char provider[64];
	char fabric[64];
	char domain[64];
	uint64_t heap_key;
	uint64_t mr_mode;
	int manual_progress;
	size_t max_msg_size;
	size_t inject_size;
	uint64_t order;
	int delivery_complete;
	int wait_fd;
	/* The largest operations whose data is placed in order after an earlier one's
	 * (max_order_raw_size, max_order_war_size, max_order_waw_size). */
	size_t max_order_size[3];
	/* Whether sends to a peer are received in order (FI_ORDER_SAS). */
	int sends_in_order;
	/* Whether the endpoint has messages (FI_MSG). */
	int messages;
	/* Whether receive completions name their source (FI_SOURCE). */
	int sources;
	/* Bytes of a memory key the application may choose (mr_key_size). */
	size_t mr_key_size;
	/* Whether operations may carry FI_FENCE (the endpoint was opened with it). */
	int fence;
};

/* The orders the transport can use, as providers report them (requesting none, they list
 * what they keep): RMA after RMA and atomic after atomic, read or write after read or
 * write, and the generic RAR/RAW/WAR/WAW, which cover RMA and atomics together (up to
 * the max_order_*_size of their data); the Rust side waits where the provider does not
 * promise one. */
#define SYMMEM_ORDER (FI_ORDER_RMA_RAR | FI_ORDER_RMA_RAW | FI_ORDER_RMA_WAR | \
		      FI_ORDER_RMA_WAW | FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | \
		      FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW | FI_ORDER_RAR | \
		      FI_ORDER_RAW | FI_ORDER_WAR | FI_ORDER_WAW)

/* The orders across RMA and atomics asked for first (see symmem_ofi_open). */
#define SYMMEM_ORDER_ACROSS (FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAW)

static void say(char *err, size_t len, const char *what, int rc)
{
	if (err && len)
		snprintf(err, len, "%s: %s (%d)", what, fi_strerror(-rc), -rc);
}

static struct fi_info *endpoint_hints(const char *prov, int hmem);

/* Whether `name` is one of the comma-separated names of `list`. */
static int listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list;
	while ((p = strstr(p, name))) {
		if ((p == list || p[-1] == ' ') && (p[n] == ',' || p[n] == 0))
			return 1;
		p += n;
	}
	return 0;
}

/* The providers fi_getinfo offers RDM endpoints with RMA and atomics, comma-separated. */
int symmem_ofi_providers(char *out, size_t len)
{
	struct fi_info *hints = endpoint_hints(NULL, 0), *info = NULL, *i;
	int rc;
	size_t used = 0;
	if (!hints)
		return -FI_ENOMEM;
	rc = fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (len)
		out[0] = 0;
	if (rc)
		return rc == -FI_ENODATA ? 0 : rc;
	for (i = info; i; i = i->next) {
		const char *name = i->fabric_attr->prov_name;
		if (listed(out, name))
			continue;
		used += snprintf(out + used, used < len ? len - used : 0, "%s%s",
				 used ? ", " : "", name);
	}
	fi_freeinfo(info);
	return 0;
}

/* 0 when libfabric has a provider named `prov` at all (with any capabilities), else the
 * fi_getinfo error (-FI_ENODATA: none). */
int symmem_ofi_known(const char *prov)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	int rc;
	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup(prov);
	rc = fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	fi_freeinfo(info);
	return rc;
}

static int query(struct fid_domain *d, enum fi_datatype dt, enum fi_op op, uint64_t flags)
{
	struct fi_atomic_attr attr;
	return fi_query_atomic(d, dt, op, &attr, flags);
}

/* The atomics the transport issues, on 32- and 64-bit unsigned words: 0 when every one is
 * supported, else the first missing one named in `err`. */
static int check_atomics(struct fid_domain *d, char *err, size_t len)
{
	static const struct {
		enum fi_op op;
		uint64_t flags;
		const char *name;
	} need[] = {
		{FI_SUM, 0, "FI_SUM"},
		{FI_ATOMIC_WRITE, 0, "FI_ATOMIC_WRITE"},
		{FI_ATOMIC_READ, FI_FETCH_ATOMIC, "fetching FI_ATOMIC_READ"},
		{FI_ATOMIC_WRITE, FI_FETCH_ATOMIC, "fetching FI_ATOMIC_WRITE (swap)"},
		{FI_SUM, FI_FETCH_ATOMIC, "fetching FI_SUM"},
		{FI_BAND, FI_FETCH_ATOMIC, "fetching FI_BAND"},
		{FI_BOR, FI_FETCH_ATOMIC, "fetching FI_BOR"},
		{FI_BXOR, FI_FETCH_ATOMIC, "fetching FI_BXOR"},
		{FI_CSWAP, FI_COMPARE_ATOMIC, "FI_CSWAP"},
	};
	static const enum fi_datatype types[] = {FI_UINT32, FI_UINT64};
	size_t i, t;
	for (t = 0; t < 2; t++)
		for (i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
			int rc = query(d, types[t], need[i].op, need[i].flags);
			if (rc) {
				if (err && len)
					snprintf(err, len, "the provider has no %s on %s (fi_query_atomic: %s)",
						 need[i].name, t ? "FI_UINT64" : "FI_UINT32",
						 fi_strerror(-rc));
				return rc;
			}
		}
	return 0;
}

/* Closes what symmem_ofi_open opened, each object before what it is bound to: the memory
 * regions first (with FI_MR_ENDPOINT they are bound to the endpoint, and such providers
 * refuse to close an endpoint that still has them), then the endpoint, then the address
 * vector and CQ it was bound to, then the domain, then the fabric. */
void symmem_ofi_close(struct symmem_ofi *o)
{
	if (!o)
		return;
	if (o->heap_mr)
		fi_close(&o->heap_mr->fid);
	if (o->bounce_mr)
		fi_close(&o->bounce_mr->fid);
	if (o->ep)
		fi_close(&o->ep->fid);
	if (o->av)
		fi_close(&o->av->fid);
	if (o->cq)
		fi_close(&o->cq->fid);
	if (o->domain)
		fi_close(&o->domain->fid);
	if (o->fabric)
		fi_close(&o->fabric->fid);
	if (o->info)
		fi_freeinfo(o->info);
	free(o->peers);
	free(o);
}

/* Registers `len` bytes at `buf`: host memory when `cuda_device` < 0, else memory of
 * that CUDA device (FI_HMEM_CUDA). */
static int reg(struct symmem_ofi *o, void *buf, size_t len, int cuda_device, uint64_t access,
	       uint64_t key, struct fid_mr **mr, const char *what, char *err, size_t errlen)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct fi_mr_attr attr = {
		.mr_iov = &iov,
		.iov_count = 1,
		.access = access,
		.requested_key = key,
		.iface = cuda_device < 0 ? FI_HMEM_SYSTEM : FI_HMEM_CUDA,
	};
	int rc;
	if (cuda_device >= 0)
		attr.device.cuda = cuda_device;
	rc = fi_mr_regattr(o->domain, &attr, 0, mr);
	if (rc) {
		say(err, errlen, what, rc);
		return rc;
	}
	if (o->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		rc = fi_mr_bind(*mr, &o->ep->fid, 0);
		if (!rc)
			rc = fi_mr_enable(*mr);
		if (rc) {
			say(err, errlen, "fi_mr_bind/fi_mr_enable", rc);
			return rc;
		}
	}
	return 0;
}

/* The hints of the transport's endpoints: RDM, RMA and atomics, every registration mode it
 * can honour, completion at delivery; FI_HMEM when the heap is GPU memory. (The endpoint
 * itself asks for messages too where the provider has them: symmem_ofi_open.) */
static struct fi_info *endpoint_hints(const char *prov, int hmem)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		return NULL;
	hints->caps = FI_RMA | FI_ATOMIC | (hmem ? FI_HMEM : 0);
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_ENDPOINT | (hmem ? FI_MR_HMEM : 0);
	/* A completion means the data is at the target (visible to its loads): quiet waits
	 * for the completions of everything issued. */
	hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	if (prov)
		hints->fabric_attr->prov_name = strdup(prov);
	return hints;
}

/* 0 when provider `prov` (any when NULL) can register CUDA memory (FI_HMEM) for RMA and
 * atomics on an RDM endpoint, else the libfabric error (-FI_ENODATA: none can). */
int symmem_ofi_hmem(const char *prov)
{
	struct fi_info *hints = endpoint_hints(prov, 1), *info = NULL;
	int rc;
	if (!hints)
		return -FI_ENOMEM;
	rc = fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	fi_freeinfo(info);
	return rc;
}

/* The domains (NICs) provider `prov` offers RDM endpoints with RMA and atomics on (with
 * FI_HMEM when `hmem`), in fi_getinfo's order, one line each: the domain's name, its
 * fabric's name and the NIC's PCI address ("0000:1b:00.0", from fi_info's nic bus
 * attributes; empty where the provider gives none), separated by tabs. A domain listed
 * again (another fabric or address format) is left out. */
int symmem_ofi_domains(const char *prov, int hmem, char *out, size_t len)
{
	struct fi_info *hints = endpoint_hints(prov, hmem), *info = NULL, *i;
	int rc;
	size_t used = 0;
	if (!hints)
		return -FI_ENOMEM;
	rc = fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (len)
		out[0] = 0;
	if (rc)
		return rc;
	for (i = info; i; i = i->next) {
		const char *name = i->domain_attr->name ? i->domain_attr->name : "";
		const char *fabric = i->fabric_attr->name ? i->fabric_attr->name : "";
		struct fi_info *j;
		char pci[32] = "";
		for (j = info; j != i; j = j->next)
			if (j->domain_attr->name && !strcmp(j->domain_attr->name, name))
				break;
		if (j != i)
			continue;
		if (i->nic && i->nic->bus_attr && i->nic->bus_attr->bus_type == FI_BUS_PCI) {
			struct fi_pci_attr *a = &i->nic->bus_attr->attr.pci;
			snprintf(pci, sizeof(pci), "%04x:%02x:%02x.%x", a->domain_id, a->bus_id,
				 a->device_id, a->function_id);
		}
		used += snprintf(out + used, used < len ? len - used : 0, "%s\t%s\t%s\n", name,
				 fabric, pci);
	}
	fi_freeinfo(info);
	return used < len ? 0 : -FI_ETOOSMALL;
}

/* shm names an endpoint's region after the process ("<pid>:<domain>:<endpoint>" in
 * /dev/shm). A region left there by a process that was killed makes fi_enable of a later
 * process with the same pid fail (EBUSY); a name with the time in it meets no stale one.
 * Other providers keep their own names. */
static int unique_shm_name(struct symmem_ofi *o, char *err, size_t errlen)
{
	char name[64];
	struct timespec now;
	int rc;
	if (strcmp(o->info->fabric_attr->prov_name, "shm"))
		return 0;
	clock_gettime(CLOCK_REALTIME, &now);
	snprintf(name, sizeof(name), "symmem-%ld-%lld.%09ld", (long)getpid(),
		 (long long)now.tv_sec, (long)now.tv_nsec);
	if ((rc = fi_setname(&o->ep->fid, name, strlen(name) + 1)))
		say(err, errlen, "fi_setname (shm region name)", rc);
	return rc;
}

/* The heap's memory key from `drawn` (random bits): as many bytes of it as the domain's
 * keys have (mr_key_size), never the bounce buffer's key (2). Where the provider picks
 * keys (FI_MR_PROV_KEY) it ignores this one. */
static uint64_t heap_key_of(const struct fi_info *info, uint64_t drawn)
{
	size_t bytes = info->domain_attr->mr_key_size;
	uint64_t key = bytes && bytes < 8 ? drawn & ((1ull << (8 * bytes)) - 1) : drawn;
	return key == 2 ? 3 : key;
}

/* Where the provider also offers FI_FENCE with the `hints` that found `*info`, replaces
 * `*info` with the answer that has it: a same-peer operation that must follow an earlier
 * one then goes at once with FI_FENCE instead of waiting for it. Not on libfabric 1.17's
 * sockets, which offers it but whose fenced operations here stopped completing (puts,
 * gets and put_signals between 2 simulated nodes hung with the order bits assumed away);
 * it keeps every order, so it never needs a fence anyway. */
static void ask_fence(struct fi_info *hints, struct fi_info **info)
{
	struct fi_info *fenced = NULL;
	uint64_t caps = hints->caps;
	if (!strcmp((*info)->fabric_attr->prov_name, "sockets"))
		return;
	hints->caps |= FI_FENCE;
	if (!fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &fenced) &&
	    (fenced->caps & FI_FENCE)) {
		fi_freeinfo(*info);
		*info = fenced;
		fenced = NULL;
	}
	fi_freeinfo(fenced);
	hints->caps = caps;
}

/* Opens an RDM endpoint of provider `prov` (any provider with RMA and atomics when NULL),
 * on domain `domain` of fabric `fabric` (libfabric's first when NULL), and registers `heap`
 * (for peers' RMA and atomics, under key `heap_key` where the application chooses keys:
 * host memory when `heap_cuda_device` is negative, else memory of that CUDA device) and
 * `bounce` (the host buffers of this PE's operations). Orders across RMA and atomics are
 * asked for up to `ordered_bytes` of data (the largest piece the Rust side posts). */
int symmem_ofi_open(const char *prov, const char *domain, const char *fabric, void *heap,
		    size_t heap_len, int heap_cuda_device, void *bounce, size_t bounce_len,
		    size_t ordered_bytes, int wait, uint64_t heap_key, struct symmem_ofi **out,
		    struct symmem_ofi_attrs *attrs, char *err, size_t errlen)
{
	struct fi_info *hints = endpoint_hints(prov, heap_cuda_device >= 0);
	struct symmem_ofi *o = calloc(1, sizeof(*o));
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_MSG,
				     .wait_obj = wait ? FI_WAIT_FD : FI_WAIT_NONE};
	int rc;
	*out = NULL;
	if (!hints || !o) {
		fi_freeinfo(hints);
		free(o);
		say(err, errlen, "allocating", -FI_ENOMEM);
		return -FI_ENOMEM;
	}
	/* The Rust side serializes every call (and drives progress where the provider needs
	 * it: with the threads that wait, and a thread of its own that blocks on the CQ's
	 * wait object, or polls, while none does). A provider progress thread (FI_PROGRESS_AUTO) is not
	 * asked for: rxm's wakes on every arrival and contends with the thread that polls,
	 * which doubled round trips here. */
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	if (domain)
		hints->domain_attr->name = strdup(domain);
	if (fabric)
		hints->fabric_attr->name = strdup(fabric);
	/* First with messages (FI_MSG, for the transport's own: messages.rs) whose receive
	 * completions name their source (FI_SOURCE, checked against the message's sender),
	 * then with messages alone, then without;
	 * each first with the orders across RMA and atomics asked for, with their data placed
	 * in order up to `ordered_bytes` (a provider reports them, and max_order_*_size, only
	 * when asked: a put_signal's signal then needs no wait for its data), then without. */
	rc = -FI_ENODATA;
	for (int msg = 2; msg >= 0 && rc == -FI_ENODATA; msg--) {
		hints->caps = (hints->caps & ~(FI_MSG | FI_SOURCE)) | (msg ? FI_MSG : 0) |
			      (msg == 2 ? FI_SOURCE : 0);
		hints->tx_attr->msg_order = hints->rx_attr->msg_order = SYMMEM_ORDER_ACROSS;
		hints->ep_attr->max_order_raw_size = ordered_bytes;
		hints->ep_attr->max_order_waw_size = ordered_bytes;
		rc = fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &o->info);
		if (rc == -FI_ENODATA) {
			hints->tx_attr->msg_order = hints->rx_attr->msg_order = 0;
			hints->ep_attr->max_order_raw_size = hints->ep_attr->max_order_waw_size = 0;
			rc = fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &o->info);
		}
	}
	if (!rc)
		ask_fence(hints, &o->info);
	fi_freeinfo(hints);
	if (rc) {
		say(err, errlen, "fi_getinfo", rc);
		goto fail;
	}
	if ((rc = fi_fabric(o->info->fabric_attr, &o->fabric, NULL))) {
		say(err, errlen, "fi_fabric", rc);
		goto fail;
	}
	if ((rc = fi_domain(o->fabric, o->info, &o->domain, NULL))) {
		say(err, errlen, "fi_domain", rc);
		goto fail;
	}
	if ((rc = check_atomics(o->domain, err, errlen)))
		goto fail;
	if ((rc = fi_av_open(o->domain, &av_attr, &o->av, NULL))) {
		say(err, errlen, "fi_av_open", rc);
		goto fail;
	}
	/* With `wait`, a wait object (a file descriptor) where the provider has one, for the
	 * progress thread to block on; else none, and that thread polls. */
	rc = fi_cq_open(o->domain, &cq_attr, &o->cq, NULL);
	if (rc && cq_attr.wait_obj != FI_WAIT_NONE) {
		cq_attr.wait_obj = FI_WAIT_NONE;
		rc = fi_cq_open(o->domain, &cq_attr, &o->cq, NULL);
	}
	if (rc) {
		say(err, errlen, "fi_cq_open", rc);
		goto fail;
	}
	if ((rc = fi_endpoint(o->domain, o->info, &o->ep, NULL))) {
		say(err, errlen, "fi_endpoint", rc);
		goto fail;
	}
	if ((rc = fi_ep_bind(o->ep, &o->av->fid, 0)) ||
	    (rc = fi_ep_bind(o->ep, &o->cq->fid, FI_TRANSMIT | FI_RECV))) {
		say(err, errlen, "fi_ep_bind", rc);
		goto fail;
	}
	if ((rc = unique_shm_name(o, err, errlen)))
		goto fail;
	if ((rc = fi_enable(o->ep))) {
		say(err, errlen, "fi_enable", rc);
		goto fail;
	}
	if ((rc = reg(o, heap, heap_len, heap_cuda_device,
		      FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ | FI_WRITE,
		      heap_key_of(o->info, heap_key), &o->heap_mr,
		      heap_cuda_device < 0 ? "fi_mr_regattr (symmetric heap)"
					   : "fi_mr_regattr (symmetric heap in CUDA memory, FI_HMEM_CUDA)",
		      err, errlen)) ||
	    (rc = reg(o, bounce, bounce_len, -1, FI_READ | FI_WRITE | FI_SEND | FI_RECV, 2,
		      &o->bounce_mr,
		      "fi_mr_regattr (bounce buffer)", err, errlen)))
		goto fail;
	/* libfabric 1.17's shm (and later ones, to 1.21 at least) frees the buffer of a
	 * delivery-complete non-fetching atomic twice, at the target and again at the origin
	 * (smr_progress.c), corrupting its pool: operands of other atomics change, signals
	 * arrive with wrong values, fi_cq_read crashes. Fetching atomics are freed once. */
	o->fetch_for_update = !strcmp(o->info->fabric_attr->prov_name, "shm");
	snprintf(attrs->provider, sizeof(attrs->provider), "%s", o->info->fabric_attr->prov_name);
	snprintf(attrs->fabric, sizeof(attrs->fabric), "%s", o->info->fabric_attr->name);
	snprintf(attrs->domain, sizeof(attrs->domain), "%s", o->info->domain_attr->name);
	attrs->heap_key = fi_mr_key(o->heap_mr);
	attrs->mr_mode = o->info->domain_attr->mr_mode;
	attrs->manual_progress = o->info->domain_attr->data_progress == FI_PROGRESS_MANUAL ||
				 o->info->domain_attr->control_progress == FI_PROGRESS_MANUAL;
	attrs->max_msg_size = o->info->ep_attr->max_msg_size;
	attrs->inject_size = o->info->tx_attr->inject_size;
	attrs->delivery_complete = (o->info->tx_attr->op_flags & FI_DELIVERY_COMPLETE) != 0;
	attrs->order = o->info->tx_attr->msg_order & o->info->rx_attr->msg_order & SYMMEM_ORDER;
	attrs->max_order_size[0] = o->info->ep_attr->max_order_raw_size;
	attrs->max_order_size[1] = o->info->ep_attr->max_order_war_size;
	attrs->max_order_size[2] = o->info->ep_attr->max_order_waw_size;
	attrs->messages = (o->info->caps & FI_MSG) != 0;
	attrs->sources = (o->info->caps & FI_SOURCE) != 0;
	attrs->mr_key_size = o->info->domain_attr->mr_key_size;
	attrs->sends_in_order =
		(o->info->tx_attr->msg_order & o->info->rx_attr->msg_order & FI_ORDER_SAS) != 0;
	attrs->fence = (o->info->caps & FI_FENCE) != 0;
	o->delivery = o->info->tx_attr->op_flags & FI_DELIVERY_COMPLETE;
	attrs->wait_fd = -1;
	if (cq_attr.wait_obj == FI_WAIT_FD && fi_control(&o->cq->fid, FI_GETWAIT, &attrs->wait_fd))
		attrs->wait_fd = -1;
	*out = o;
	return 0;
fail:
	symmem_ofi_close(o);
	return rc;
}

/* 0 when the CQ's wait object may be blocked on (nothing is pending that only progress
 * would reveal), -FI_EAGAIN when progress must run first. */
int symmem_ofi_trywait(struct symmem_ofi *o)
{
	struct fid *cq = &o->cq->fid;
	return fi_trywait(o->fabric, &cq, 1);
}

/* This endpoint's address, for the peers' address vectors. */
int symmem_ofi_name(struct symmem_ofi *o, void *buf, size_t *len)
{
	return fi_getname(&o->ep->fid, buf, len);
}

/* Inserts every PE's address (`n` of `addrlen` bytes each, in PE order). */
int symmem_ofi_insert(struct symmem_ofi *o, const void *addrs, size_t addrlen, size_t n,
		      char *err, size_t errlen)
{
	size_t i;
	int rc;
	o->peers = calloc(n, sizeof(fi_addr_t));
	if (!o->peers)
		return -FI_ENOMEM;
	for (i = 0; i < n; i++) {
		rc = fi_av_insert(o->av, (const char *)addrs + i * addrlen, 1, &o->peers[i], 0, NULL);
		if (rc != 1) {
			say(err, errlen, "fi_av_insert", rc < 0 ? rc : -FI_EINVAL);
			return rc < 0 ? rc : -FI_EINVAL;
		}
	}
	o->n_peers = n;
	return 0;
}

/* An operation's context: its number (1, 2, …), which its completion entry returns. */
static void *ctx(uint64_t op)
{
	return (void *)(uintptr_t)op;
}

static void *bounce_desc(struct symmem_ofi *o)
{
	return fi_mr_desc(o->bounce_mr);
}

/* The descriptor of a local buffer: the bounce buffer's, or none for memory the provider
 * needs no registration of (no FI_MR_LOCAL). */
static void *desc(struct symmem_ofi *o, int bounce)
{
	return bounce ? bounce_desc(o) : NULL;
}

/* Operation `op`: writes `len` bytes at `local` (in the bounce buffer when `bounce`, else
 * unregistered memory) to `raddr` (key `key`) on PE `pe`; it completes at delivery (the
 * endpoint's default) when `at_delivery`, else at the provider's transmit level, with no
 * reply from the target. */
ssize_t symmem_ofi_write(struct symmem_ofi *o, uint64_t op, const void *local, int bounce,
			 size_t len, size_t pe, uint64_t raddr, uint64_t key, int at_delivery)
{
	if (at_delivery)
		return fi_write(o->ep, local, len, desc(o, bounce), o->peers[pe], raddr, key,
				ctx(op));
	struct iovec iov = { .iov_base = (void *)local, .iov_len = len };
	void *d = desc(o, bounce);
	struct fi_rma_iov remote = { .addr = raddr, .len = len, .key = key };
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &d,
		.iov_count = 1,
		.addr = o->peers[pe],
		.rma_iov = &remote,
		.rma_iov_count = 1,
		.context = ctx(op),
	};
	return fi_writemsg(o->ep, &msg, FI_COMPLETION);
}

/* Operation `op`: reads `len` bytes from `raddr` on PE `pe` into `local` (as for writes). */
ssize_t symmem_ofi_read(struct symmem_ofi *o, uint64_t op, void *local, int bounce, size_t len,
			size_t pe, uint64_t raddr, uint64_t key)
{
	return fi_read(o->ep, local, len, desc(o, bounce), o->peers[pe], raddr, key, ctx(op));
}

/* Posts the receive of one message into `buf` (`len` bytes of the bounce buffer), its
 * completion carrying `context`. */
ssize_t symmem_ofi_recv(struct symmem_ofi *o, uint64_t context, void *buf, size_t len)
{
	return fi_recv(o->ep, buf, len, bounce_desc(o), FI_ADDR_UNSPEC, ctx(context));
}

/* Operation `op`: sends the `len` bytes at `buf` (bounce memory) to PE `pe`. */
ssize_t symmem_ofi_send(struct symmem_ofi *o, uint64_t op, const void *buf, size_t len,
			size_t pe)
{
	return fi_send(o->ep, buf, len, bounce_desc(o), o->peers[pe], ctx(op));
}

/* Sends the `len` bytes at `buf` (at most the inject size; any memory) to PE `pe`, with no
 * completion. */
ssize_t symmem_ofi_inject(struct symmem_ofi *o, const void *buf, size_t len, size_t pe)
{
	return fi_inject(o->ep, buf, len, o->peers[pe]);
}

static enum fi_datatype dtype(int width)
{
	return width == 4 ? FI_UINT32 : FI_UINT64;
}

/* Operation `id`: a non-fetching atomic `op` (an enum fi_op) of the word at `operand`
 * (bounce memory; on providers whose non-fetching atomics are broken, a fetching one whose
 * old value goes to the unused word 16 bytes further). */
ssize_t symmem_ofi_atomic(struct symmem_ofi *o, uint64_t id, const void *operand, int width,
			  int op, size_t pe, uint64_t raddr, uint64_t key)
{
	if (o->fetch_for_update)
		return fi_fetch_atomic(o->ep, operand, 1, bounce_desc(o), (char *)operand + 16,
				       bounce_desc(o), o->peers[pe], raddr, key, dtype(width),
				       (enum fi_op)op, ctx(id));
	return fi_atomic(o->ep, operand, 1, bounce_desc(o), o->peers[pe], raddr, key,
			 dtype(width), (enum fi_op)op, ctx(id));
}

/* A fetching atomic: the old value goes to `result` (bounce memory). */
ssize_t symmem_ofi_fetch_atomic(struct symmem_ofi *o, uint64_t id, const void *operand,
				void *result, int width, int op, size_t pe, uint64_t raddr,
				uint64_t key)
{
	return fi_fetch_atomic(o->ep, operand, 1, bounce_desc(o), result, bounce_desc(o),
			       o->peers[pe], raddr, key, dtype(width), (enum fi_op)op, ctx(id));
}

/* Compare-and-swap: stores `*operand` where the word equals `*compare`. */
ssize_t symmem_ofi_compare_atomic(struct symmem_ofi *o, uint64_t id, const void *operand,
				  const void *compare, void *result, int width, size_t pe,
				  uint64_t raddr, uint64_t key)
{
	return fi_compare_atomic(o->ep, operand, 1, bounce_desc(o), compare, bounce_desc(o),
				 result, bounce_desc(o), o->peers[pe], raddr, key, dtype(width),
				 FI_CSWAP, ctx(id));
}

/* The PE of the address vector entry `addr` (a completion's source), or UINT64_MAX for
 * none (an endpoint outside the job, or FI_ADDR_NOTAVAIL). FI_AV_TABLE numbers entries
 * from 0 in the order inserted, which is PE order. */
static uint64_t source_pe(struct symmem_ofi *o, fi_addr_t addr)
{
	if (addr < o->n_peers && o->peers[addr] == addr)
		return addr;
	for (size_t i = 0; i < o->n_peers; i++)
		if (o->peers[i] == addr)
			return i;
	return UINT64_MAX;
}

/* Drives progress and reads up to `max` completions into `ops` (the contexts of the
 * operations completed, in no particular order) and `lens` (their lengths: the bytes a
 * receive got) and `sources` (for a receive, the PE whose endpoint sent it where the
 * endpoint has FI_SOURCE: source_pe); returns how many, or a negative error
 * when one failed (then `err` says why, with the provider's message, and `failed_op` is the
 * failed operation's number, or 0 when unknown). */
int64_t symmem_ofi_completed_from(struct symmem_ofi *o, uint64_t *ops, size_t *lens,
				  uint64_t *sources, size_t max, uint64_t *failed_op, char *err,
				  size_t errlen)
{
	struct fi_cq_msg_entry entries[64];
	fi_addr_t from[64];
	ssize_t rc, i;
	if (max > 64)
		max = 64;
	rc = fi_cq_readfrom(o->cq, entries, max, from);
	if (rc == -FI_EAVAIL) {
		struct fi_cq_err_entry e;
		memset(&e, 0, sizeof(e));
		*failed_op = 0;
		if (fi_cq_readerr(o->cq, &e, 0) == 1) {
			char buf[128] = "";
			const char *prov =
				fi_cq_strerror(o->cq, e.prov_errno, e.err_data, buf, sizeof(buf));
			*failed_op = (uint64_t)(uintptr_t)e.op_context;
			if (err && errlen)
				snprintf(err, errlen, "%s (errno %d; provider error %d: %s)",
					 fi_strerror(e.err), e.err, e.prov_errno,
					 prov ? prov : buf);
			return -(int64_t)(e.err ? e.err : FI_EIO);
		}
		say(err, errlen, "fi_cq_readerr", -FI_EIO);
		return -FI_EIO;
	}
	if (rc == -FI_EAGAIN)
		return 0;
	if (rc < 0) {
		say(err, errlen, "fi_cq_readfrom", (int)rc);
		return rc;
	}
	for (i = 0; i < rc; i++) {
		ops[i] = (uint64_t)(uintptr_t)entries[i].op_context;
		lens[i] = entries[i].len;
		sources[i] = source_pe(o, from[i]);
	}
	return rc;
}

/* The flags of an operation posted with its flags given (the *_ex calls): a completion
 * entry always (also when injected: quiet, slot reuse and ordering count every operation
 * by its entry), at delivery where `at_delivery` and the endpoint completes there, the
 * payload copied at once (FI_INJECT) where `inject`, and FI_FENCE where `fence`. */
static uint64_t flags_of(struct symmem_ofi *o, int at_delivery, int inject, int fence)
{
	return FI_COMPLETION | (at_delivery ? o->delivery : 0) | (inject ? FI_INJECT : 0) |
	       (fence ? FI_FENCE : 0);
}

/* Operation `op`: symmem_ofi_write's write, with `inject` (at most the inject size; the
 * bytes at `local` may be reused on return, any memory) and `fence`; without either, that
 * very call. (The *_ex calls below alike.) */
ssize_t symmem_ofi_write_ex(struct symmem_ofi *o, uint64_t op, const void *local, int bounce,
			    size_t len, size_t pe, uint64_t raddr, uint64_t key, int at_delivery,
			    int inject, int fence)
{
	if (!inject && !fence)
		return symmem_ofi_write(o, op, local, bounce, len, pe, raddr, key, at_delivery);
	struct iovec iov = {.iov_base = (void *)local, .iov_len = len};
	void *d = inject ? NULL : desc(o, bounce);
	struct fi_rma_iov remote = {.addr = raddr, .len = len, .key = key};
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &d,
		.iov_count = 1,
		.addr = o->peers[pe],
		.rma_iov = &remote,
		.rma_iov_count = 1,
		.context = ctx(op),
	};
	return fi_writemsg(o->ep, &msg, flags_of(o, at_delivery, inject, fence));
}

/* Operation `op`: symmem_ofi_read's read, with FI_FENCE where `fence`. */
ssize_t symmem_ofi_read_ex(struct symmem_ofi *o, uint64_t op, void *local, int bounce,
			   size_t len, size_t pe, uint64_t raddr, uint64_t key, int fence)
{
	if (!fence)
		return symmem_ofi_read(o, op, local, bounce, len, pe, raddr, key);
	struct iovec iov = {.iov_base = local, .iov_len = len};
	void *d = desc(o, bounce);
	struct fi_rma_iov remote = {.addr = raddr, .len = len, .key = key};
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &d,
		.iov_count = 1,
		.addr = o->peers[pe],
		.rma_iov = &remote,
		.rma_iov_count = 1,
		.context = ctx(op),
	};
	/* A read completes once its bytes are here: no delivery level to ask for. */
	return fi_readmsg(o->ep, &msg, flags_of(o, 0, 0, fence));
}

/* The parts of an atomic message on the word at `raddr` of PE `pe`. */
struct atomic_parts {
	struct fi_ioc operand, compare, result;
	struct fi_rma_ioc remote;
	void *desc;
	struct fi_msg_atomic msg;
};

static void atomic_msg(struct symmem_ofi *o, struct atomic_parts *p, uint64_t id,
		       const void *operand, int bounce, int width, int op, size_t pe,
		       uint64_t raddr, uint64_t key)
{
	p->operand = (struct fi_ioc){.addr = (void *)operand, .count = 1};
	p->remote = (struct fi_rma_ioc){.addr = raddr, .count = 1, .key = key};
	p->desc = desc(o, bounce);
	p->msg = (struct fi_msg_atomic){
		.msg_iov = &p->operand,
		.desc = &p->desc,
		.iov_count = 1,
		.addr = o->peers[pe],
		.rma_iov = &p->remote,
		.rma_iov_count = 1,
		.datatype = dtype(width),
		.op = (enum fi_op)op,
		.context = ctx(id),
	};
}

/* Operation `id`: symmem_ofi_atomic with FI_FENCE where `fence`. (Atomics are not
 * injected: libfabric 1.17's ofi_rxm writes no completion for an atomic posted with
 * FI_INJECT, even with FI_COMPLETION.) */
ssize_t symmem_ofi_atomic_ex(struct symmem_ofi *o, uint64_t id, const void *operand, int width,
			     int op, size_t pe, uint64_t raddr, uint64_t key, int fence)
{
	struct atomic_parts p;
	if (!fence)
		return symmem_ofi_atomic(o, id, operand, width, op, pe, raddr, key);
	atomic_msg(o, &p, id, operand, 1, width, op, pe, raddr, key);
	if (o->fetch_for_update) {
		p.result = (struct fi_ioc){.addr = (char *)operand + 16, .count = 1};
		return fi_fetch_atomicmsg(o->ep, &p.msg, &p.result, &p.desc, 1,
					  flags_of(o, 1, 0, fence));
	}
	return fi_atomicmsg(o->ep, &p.msg, flags_of(o, 1, 0, fence));
}

/* Operation `id`: symmem_ofi_fetch_atomic with FI_FENCE where `fence`. */
ssize_t symmem_ofi_fetch_atomic_ex(struct symmem_ofi *o, uint64_t id, const void *operand,
				   void *result, int width, int op, size_t pe, uint64_t raddr,
				   uint64_t key, int fence)
{
	struct atomic_parts p;
	if (!fence)
		return symmem_ofi_fetch_atomic(o, id, operand, result, width, op, pe, raddr, key);
	atomic_msg(o, &p, id, operand, 1, width, op, pe, raddr, key);
	p.result = (struct fi_ioc){.addr = result, .count = 1};
	return fi_fetch_atomicmsg(o->ep, &p.msg, &p.result, &p.desc, 1, flags_of(o, 1, 0, fence));
}

/* Operation `id`: symmem_ofi_compare_atomic with FI_FENCE where `fence`. */
ssize_t symmem_ofi_compare_atomic_ex(struct symmem_ofi *o, uint64_t id, const void *operand,
				     const void *compare, void *result, int width, size_t pe,
				     uint64_t raddr, uint64_t key, int fence)
{
	struct atomic_parts p;
	if (!fence)
		return symmem_ofi_compare_atomic(o, id, operand, compare, result, width, pe, raddr,
						 key);
	atomic_msg(o, &p, id, operand, 1, width, FI_CSWAP, pe, raddr, key);
	p.compare = (struct fi_ioc){.addr = (void *)compare, .count = 1};
	p.result = (struct fi_ioc){.addr = result, .count = 1};
	return fi_compare_atomicmsg(o->ep, &p.msg, &p.compare, &p.desc, 1, &p.result, &p.desc,
				    1, flags_of(o, 1, 0, fence));
}
