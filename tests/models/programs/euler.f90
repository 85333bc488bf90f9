! Test helper: Euler's method for dy/dt = -rate * y, y(0) = 1, over [0, horizon] in `steps` steps
! (as studies/sim/euler.c), reading a namelist; writes time (ES) and y (D exponent) a line.
program euler
  implicit none
  integer :: steps, i
  double precision :: rate, horizon, dt, y
  namelist /params/ steps, rate, horizon
  open (10, file='euler.nml', status='old')
  read (10, nml=params)
  close (10)
  dt = horizon / steps
  y = 1d0
  open (20, file='out.txt')
  write (20, '(ES26.17E3, D28.18)') 0d0, y
  do i = 1, steps
    y = y - rate * y * dt
    write (20, '(ES26.17E3, D28.18)') i * dt, y
  end do
  close (20)
end program euler
