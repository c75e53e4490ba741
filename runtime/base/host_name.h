/* host_name.h — the room a host's name takes wherever ranks and launchers name hosts: MPI's
 * processor name, the log's prefix, a deadline's verdict and ddprun's host lists, which compare
 * them. Open MPI's MPI_MAX_PROCESSOR_NAME, and a DNS name is at most 253 bytes: a fully qualified
 * cloud name (a GCP VM's often passes 63) is kept whole, so a restart can leave out the host a
 * verdict named. Must hold nothing but the size. */
#ifndef DDP_HOST_NAME_H
#define DDP_HOST_NAME_H

#define DDP_HOST_NAME_MAX 256 /* a host name's bytes, NUL included */

#endif
