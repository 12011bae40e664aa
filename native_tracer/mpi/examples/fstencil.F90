! fstencil.F90 -- a 1-D stencil in Fortran, for the profiler's Fortran entry points.
!
! One source, three MPI bindings (the Makefile builds each):
!   fstencil      use mpi          (calls mpi_sendrecv_, ...)
!   fstencil_h    include 'mpif.h' (the same entry points)
!   fstencil_f08  use mpi_f08      (calls mpi_sendrecv_f08_, ...)
!
!   mpirun -np 2 examples/bin/fstencil [ITERATIONS [WORK]]
!
! Per iteration: two blocking MPI_Sendrecv (the halo, 1 double each way),
! WORK sweeps over 20000 points, MPI_Allreduce of the sum (1 double). Then one
! MPI_Bcast, one MPI_Allreduce with MPI_IN_PLACE and one MPI_Barrier (in
! mpi_f08 without its optional ierror). So a rank has ITERATIONS + 3 segments
! (ITERATIONS + 1 Allreduce, the Barrier, the end at MPI_Finalize), 2 blocking
! point-to-point calls in each of the first ITERATIONS, and 1 one-to-all
! collective. Prints a checksum that depends only on the arguments.
program fstencil
#if defined(HB_F08)
  use mpi_f08
#elif defined(HB_MPIFH)
  include 'mpif.h'
#else
  use mpi
#endif
#if !defined(HB_MPIFH)
  implicit none
#endif
  integer, parameter :: n = 20000
  integer :: ierr, rank, nprocs, left, right, it, iters, work, w, i
  double precision, allocatable :: u(:), v(:)
  double precision :: s, gsum, halo_l, halo_r
  character(len=32) :: arg

  iters = 50
  work = 4
  if (command_argument_count() >= 1) then
     call get_command_argument(1, arg)
     read (arg, *) iters
  end if
  if (command_argument_count() >= 2) then
     call get_command_argument(2, arg)
     read (arg, *) work
  end if

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  left = mod(rank - 1 + nprocs, nprocs)
  right = mod(rank + 1, nprocs)
  allocate (u(n), v(n))
  do i = 1, n
     u(i) = dble(rank + 1) + dble(i) / dble(n)
  end do
  gsum = 0d0

  do it = 1, iters
     call MPI_Sendrecv(u(n), 1, MPI_DOUBLE_PRECISION, right, 1, halo_l, 1, MPI_DOUBLE_PRECISION, &
                       left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
     call MPI_Sendrecv(u(1), 1, MPI_DOUBLE_PRECISION, left, 2, halo_r, 1, MPI_DOUBLE_PRECISION, &
                       right, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
     do w = 1, work
        v(1) = 0.5d0 * u(1) + 0.25d0 * (halo_l + u(2))
        do i = 2, n - 1
           v(i) = 0.5d0 * u(i) + 0.25d0 * (u(i - 1) + u(i + 1))
        end do
        v(n) = 0.5d0 * u(n) + 0.25d0 * (u(n - 1) + halo_r)
        u = v
     end do
     s = sum(u) / dble(n)
     call MPI_Allreduce(s, gsum, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  end do

  call MPI_Bcast(gsum, 1, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  s = gsum
  call MPI_Allreduce(MPI_IN_PLACE, s, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
#if defined(HB_F08)
  call MPI_Barrier(MPI_COMM_WORLD)
#else
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
#endif
  if (rank == 0) print '(a,i0,a,es20.12)', 'fstencil iterations ', iters, ' checksum ', s
  call MPI_Finalize(ierr)
end program fstencil
