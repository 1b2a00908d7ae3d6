# marsh: the supervisor of one shell-branch or operation attempt (see
# worker/supervisor.ts).
#
# The Deno worker cannot do this part itself: its runtime owns waitpid for
# its children, it may not signal other processes without unscoped
# --allow-run, and it may not touch /proc or /sys at all. So one of these
# runs per attempt, with only perl-base modules and none loaded (a start
# costs about 3 ms; POSIX alone would add 11).
#
# fd 0: the config ("LENGTH\n" then that many bytes, see encodeConfig in
#       supervisor.ts; the view's mount steps come from worker/shell_view.ts),
#       then commands from the worker, one byte each:
#         i   SIGINT to every process of the attempt
#         k   SIGKILL to every process of the attempt, until none is left
#       End of file means the worker is gone: the supervisor then cancels by
#       itself (SIGINT, 10 s, SIGKILL).
# fd 1, 2: the branch's stdout and stderr pipes (with FIFOs, unused: the
#       branch writes to pipes of the supervisor's, relayed to the FIFOs);
# fd 3: status lines to the worker:
#   launched PID MECHANISM [CGROUP]   bash is released to run
#   exited code N | exited signal N   bash ended
#   lingering TOTAL [PID HEX]...      bash ended but TOTAL processes remain:
#                                     up to 16 by pid, each with its command
#                                     line in hex (cut to 100 bytes); about a
#                                     second after `exited`, then on a change
#   settled 1|0 [OUT ERR]             every process is gone (cgroup removed?);
#                                     with FIFOs, the bytes each reader got
#   fail MESSAGE                      set-up failed; nothing ran
#   warn MESSAGE                      a note; nothing changed
# Commands come on a pipe rather than as signals so that nothing a branch
# sends its parent (kill 0, kill -INT $PPID) is taken for the worker's word;
# the supervisor ignores every such signal.
use strict;

my ($WNOHANG, $EINTR, $ECHILD, $EEXIST) = (1, 4, 10, 17);
my ($EACCES, $ENOEXEC) = (13, 8);
my ($F_SETFD, $FD_CLOEXEC, $PR_SET_CHILD_SUBREAPER) = (2, 1, 36);
my ($CLONE_INTO_CGROUP, $SIGCHLD) = (0x200000000, 17);
my ($CLONE_NEWNS, $CLONE_NEWUSER, $ENOENT) = (0x20000, 0x10000000, 2);
my ($MS_RDONLY, $MS_NOSUID, $MS_NODEV, $MS_NOEXEC, $MS_REMOUNT) = (1, 2, 4, 8, 32);
my ($MS_NOATIME, $MS_NODIRATIME, $MS_BIND, $MS_REC, $MS_PRIVATE, $MS_RELATIME) =
  (1024, 2048, 4096, 16384, 1 << 18, 1 << 21);
my ($O_PATH, $O_CLOEXEC) = (0x200000, 0x80000);
my ($PR_CAPBSET_DROP, $PR_CAP_AMBIENT, $PR_CAP_AMBIENT_CLEAR_ALL, $CAP_SYS_ADMIN) = (24, 47, 4, 21);

open(my $st, '>&=', 3) or die "marsh supervisor: no status channel on fd 3: $!\n";
fcntl($st, $F_SETFD, $FD_CLOEXEC);

sub report {
  my $line = join(' ', @_);
  $line =~ s/[\r\n]+/ /g;
  $line = substr($line, 0, 3900);
  syswrite($st, "$line\n");
}

sub fail {
  report('fail', @_);
  exit 1;
}

my @IGNORED = qw(INT TERM HUP QUIT PIPE TSTP TTIN TTOU USR1 USR2 ALRM);
$SIG{$_} = 'IGNORE' for @IGNORED;
$SIG{CHLD} = sub { };    # only to wake select()

sub read_exact {
  my ($n) = @_;
  my $buf = '';
  while (length($buf) < $n) {
    my $got = sysread(STDIN, $buf, $n - length($buf), length($buf));
    next if !defined $got && ($! + 0) == $EINTR;
    return undef unless $got;
  }
  return $buf;
}

my $len = '';
while ($len !~ /\n$/) {
  my $c = read_exact(1);
  fail('cannot read the config length') unless defined $c && length($len) < 12;
  $len .= $c;
}
my $cfg = read_exact($len + 0);
defined $cfg or fail('the config ended early');
my @f = split /\0/, $cfg, -1;
pop @f;    # after the last terminator
fail('bad config') unless @f >= 15 && $f[0] eq 'marsh-supervisor/4';
my (undef, $mode, $attempt, $cg, $cwd, $ns, $stdin, $script, $nrs, $fifo_in, $fifo_out, $fifo_err,
  $fifo_ms, $nargv, @rest) = @f;
# An operation's argv, exec'd as it is (no shell); none: bash -c $script.
fail("bad argv length: $nargv") unless $nargv =~ /^\d{1,6}$/ && @rest > $nargv;
my @argv = splice(@rest, 0, $nargv);
my $nops = shift @rest;
fail("bad FIFO wait: $fifo_ms") unless $fifo_ms =~ /^\d{1,7}$/;
my $fifos = $fifo_in ne '';
fail('bad FIFOs') if $fifos && ($fifo_out eq '' || $fifo_err eq '');
fail("bad namespace pid: $ns") unless $ns eq '' || $ns =~ /^[1-9][0-9]{0,7}$/;
my ($want_int, $want_kill) = (0, 0);
fail("bad syscall numbers: $nrs") unless $nrs =~ /^\d+(?:,\d+){11}$/;
my ($SYS_prctl, $SYS_setsid, $SYS_close, $SYS_clone3, $SYS_rt_sigprocmask, $SYS_setns,
  $SYS_unshare, $SYS_mount, $SYS_statfs, $SYS_capget, $SYS_capset, $O_NOFOLLOW) = split /,/, $nrs;
# The view: (step, source, target) triples, done in order (see build_view).
fail("bad view length: $nops") unless $nops =~ /^\d{1,3}$/ && @rest >= 3 * $nops;
my @view = splice(@rest, 0, 3 * $nops);
my @env = @rest;
for (my $i = 0; $i < @view; $i += 3) {
  fail("bad view step: $view[$i]")
    unless $view[$i] =~ /^(?:bind|bind-ro|bind-ro-if|mkdir|tmpfs|file|remount-ro)$/;
  fail("bad view target: $view[$i + 2]") unless $view[$i + 2] =~ m{^/};
}

# Descriptors the worker inherited and passed on are not the branch's to
# hold (they may keep someone's pipe open): keep 0-3 only. Perl's own opens
# are close-on-exec.
if (opendir(my $fds, '/proc/self/fd')) {
  my @stray = grep { /^\d+$/ && $_ > 3 } readdir($fds);
  my $own = fileno($fds);
  closedir($fds);
  syscall($SYS_close, $_ + 0) for grep { $_ != $own } @stray;
}

# Own session, no controlling terminal: /dev/tty gives ENXIO, and as the
# session leader is this process, nothing below can acquire a terminal.
syscall($SYS_setsid) >= 0 or fail("cannot start a new session: $!");
syscall($SYS_prctl, $PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
  or fail("cannot become a child subreaper: $!");

my $events;
if ($mode eq 'adopt') {
  # The first supervisor of this cgroup died: end what is left in it.
  open($events, '<', "$cg/cgroup.events") or fail("cannot open $cg/cgroup.events: $!");
  $want_kill = 1;
  supervise(0);
}

# The namespace is entered, the view built and $cwd entered by the child
# (enter_branch), where the fork is mounted; here nothing is resolved.
my @run = @argv ? ($argv[0], @argv) : ('bash', 'bash', '-c', $script);
my ($ns_user, $ns_mnt);
if ($ns ne '') {
  # A gone namespace fails here, before anything runs.
  open($ns_user, '<', "/proc/$ns/ns/user")
    or fail("cannot enter the namespace of process $ns: $!");
  open($ns_mnt, '<', "/proc/$ns/ns/mnt") or fail("cannot enter the namespace of process $ns: $!");
}
my ($in, $child_out, $child_err);
# With FIFOs: the relays of worker/supervisor_relay.pl (stdin, stdout, stderr).
my @relays;
if ($fifos) {
  my $lib = substr($0, 0, rindex($0, '/') + 1) . 'supervisor_relay.pl';
  do $lib or fail("cannot load $lib: " . ($@ || $!));
  my $r;
  ($in, $child_out, $child_err, $r) =
    open_fifos($fifo_in, $fifo_out, $fifo_err, $fifo_ms, $O_NOFOLLOW | $O_CLOEXEC);
  @relays = @$r;
} elsif ($stdin eq '') {
  open($in, '<', '/dev/null') or fail("cannot open /dev/null: $!");
} else {
  open($in, '<', $stdin) or fail("cannot open the spool $stdin: $!");
}

my $mechanism = 'subreaper';
$cg = '';
if ($mode eq 'auto') {
  my ($base, $why) = cgroup_base();
  if (!defined $base) {
    report('warn', "no cgroup: $why");
  } elsif (!mkdir_p($base)) {
    report('warn', "cannot make cgroup $base: $!");
  } else {
    # Another worker (another daemon) may use the same attempt id: never
    # touch an existing group, take a name of our own instead.
    for my $dir ("$base/$attempt", "$base/$attempt.$$") {
      if (mkdir($dir)) {
        $cg = $dir;
        last;
      }
      if (($! + 0) != $EEXIST) {
        report('warn', "cannot make cgroup $dir: $!");
        last;
      }
    }
  }
}

pipe(my $go_r, my $go_w) or fail("pipe: $!");
# The child says "ok" on it once its namespace, view and cwd are set up, or why not.
pipe(my $ready_r, my $ready_w) or fail("pipe: $!");
# The child is born with the supervisor's dispositions, which ignore these,
# and a SIGINT that reached it then would be lost: block them across the
# fork so one stays pending until the child has reset them.
my $HANDED = pack('Q', (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14));    # HUP INT QUIT TERM
syscall($SYS_rt_sigprocmask, 0, $HANDED, 0, 8) == 0 or fail("cannot block signals: $!");
my ($pid, $placed);
if ($cg ne '' && open(my $dir, '<', $cg)) {
  # Born in the cgroup (clone3 with CLONE_INTO_CGROUP, Linux 5.7): moving a
  # process in through cgroup.procs waits for an RCU grace period, about
  # 12 ms here, and is left for kernels without it. Nothing is buffered
  # (every write above is syswrite), so the raw clone duplicates no output;
  # the child uses neither $$ nor anything of glibc's that caches the tid.
  my $args = pack('Q11', $CLONE_INTO_CGROUP, 0, 0, 0, $SIGCHLD, 0, 0, 0, 0, 0, fileno($dir));
  my $r = syscall($SYS_clone3, $args, length($args));
  ($pid, $placed) = ($r, 1) if $r >= 0;
  close($dir) if $r != 0;
}
$pid = fork() unless defined $pid;
defined $pid or fail("fork: $!");
if ($pid == 0) {
  $SIG{$_} = 'DEFAULT' for @IGNORED, 'CHLD';
  syscall($SYS_rt_sigprocmask, 1, $HANDED, 0, 8);    # a pending SIGINT ends the child here
  close($go_w);
  close($ready_r);
  my $why = eval { enter_branch() };
  $why = "internal fault: $@" if $@;
  syswrite($ready_w, defined $why ? $why : 'ok');
  exit 127 if defined $why;
  close($ready_w);
  # Run no branch code before the supervisor has placed this process.
  my $go = '';
  sysread($go_r, $go, 1) == 1 or exit 127;
  close($go_r);
  setpgrp(0, 0);    # its own process group, so `kill 0` cannot reach the supervisor
  open(STDIN, '<&', $in) or exit 127;    # replaces the command pipe
  close($in);
  if ($fifos) {
    open(STDOUT, '>&', $child_out) or exit 127;
    open(STDERR, '>&', $child_err) or exit 127;
    close($_) for $child_out, $child_err;
  }
  %ENV = ();
  for my $kv (@env) {
    my ($k, $v) = split /=/, $kv, 2;
    $ENV{$k} = $v;
  }
  { exec { $run[0] } @run[1 .. $#run]; }
  my $errno = $! + 0;
  print STDERR "marsh: cannot run $run[1]: $!\n";
  # As a shell says it: found but not runnable 126, else 127.
  exit(($errno == $EACCES || $errno == $ENOEXEC) ? 126 : 127);
}
syscall($SYS_rt_sigprocmask, 1, $HANDED, 0, 8);    # pending ones are ignored here
close($go_r);
close($in);
close($_) for grep { defined } $child_out, $child_err;
close($ready_w);
close($_) for grep { defined } $ns_user, $ns_mnt;
my $ready = '';
for (;;) {
  my $got = sysread($ready_r, $ready, 4000 - length($ready), length($ready));
  next if !defined $got && ($! + 0) == $EINTR;
  last unless $got;
}
close($ready_r);
if ($ready ne 'ok') {
  # Nothing of the branch ran: the child is ending (or ended) by itself.
  kill('KILL', $pid);
  1 while waitpid($pid, 0) < 0 && ($! + 0) == $EINTR;
  rmdir($cg) if $cg ne '';
  fail($ready eq '' ? 'the branch ended while its view was set up' : $ready);
}

if ($cg ne '') {
  my $ok = $placed || write_file("$cg/cgroup.procs", "$pid\n");
  my $err = "$!";
  $ok &&= open($events, '<', "$cg/cgroup.events");
  if ($ok) {
    $mechanism = 'cgroup';
  } else {
    report('warn', "cannot enter cgroup $cg: $err");
    rmdir($cg);
    $cg = '';
  }
}
report('launched', $pid, $mechanism, $cg eq '' ? () : ($cg));
syswrite($go_w, 'g');
close($go_w);
# Hold nothing of the branch's: its pipes end when its processes close them.
open(STDOUT, '>', '/dev/null');
open(STDERR, '>', '/dev/null');
chdir('/');
supervise($pid);

# In the child: the service's user and mount namespaces (if any), the view
# (if any), then $cwd. Returns why it failed, or undef; nothing of the
# branch has run yet either way.
sub enter_branch {
  if ($ns ne '') {
    # Perl is single-threaded, as setns(CLONE_NEWUSER) requires. The uid
    # stays ours, which that namespace maps to its root.
    syscall($SYS_setns, fileno($ns_user), $CLONE_NEWUSER) == 0
      or return "cannot enter the user namespace of process $ns: $!";
    syscall($SYS_setns, fileno($ns_mnt), $CLONE_NEWNS) == 0
      or return "cannot enter the mount namespace of process $ns: $!";
  }
  close($_) for grep { defined } $ns_user, $ns_mnt;
  if (@view) {
    my $why = build_view();
    return "cannot set up the branch's view: $why" if defined $why;
  }
  chdir($cwd) or return "cannot enter $cwd: $!";
  return undef;
}

# A private mount namespace with the view's steps done in it, then
# CAP_SYS_ADMIN gone from the bounding set, so that bash and everything it
# starts can neither unmount nor remount any of it (docs/engine.md,
# "Containment"). Every source is opened (O_PATH, no symlink anywhere on its
# path) before the first mount covers anything, and bound through its
# /proc/self/fd name, so a later step never re-resolves an earlier source.
sub build_view {
  syscall($SYS_unshare, $CLONE_NEWNS) == 0 or return "cannot make a mount namespace: $!";
  # Nothing mounted here may reach the namespace it came from.
  # (syscall may write through a string argument: each one is a copy.)
  my $slash = '/';
  syscall($SYS_mount, 0, $slash, 0, $MS_REC | $MS_PRIVATE, 0) == 0
    or return "cannot make / private: $!";
  my (%src, %repo_of);
  for (my $i = 0; $i < @view; $i += 3) {
    my ($step, $source) = @view[$i, $i + 1];
    next unless $step eq 'bind' || $step eq 'bind-ro' || $step eq 'bind-ro-if';
    next if exists $src{$source};
    if ($step eq 'bind-ro-if') {
      # Bound if it is there (the user's .git of a Git project), as a
      # directory or a file, never through a symlink.
      if (!lstat($source)) {
        return "cannot look at $source: $!" unless ($! + 0) == $ENOENT;
        $src{$source} = undef;
        next;
      }
      return "$source is a symlink" if -l _;
      return "$source is neither a directory nor a file" unless -d _ || -f _;
      if (-f _) {
        # A worktree's gitfile: the repository it names is outside the
        # project, and is made read-only at its own place too.
        my ($repo, $why) = git_common_dir($source);
        return $why if defined $why;
        sysopen(my $fh, $repo, $O_PATH | $O_CLOEXEC) or return "cannot open $repo: $!";
        my $fd = '/proc/self/fd/' . fileno($fh);
        my $at = readlink($fd);
        return "cannot resolve $repo" unless defined $at && $at =~ m{^/};
        $repo_of{$source} = [$fh, $fd, $at];
      }
    }
    sysopen(my $fh, $source, $O_PATH | $O_CLOEXEC | $O_NOFOLLOW)
      or return "cannot open $source: $!";
    my $fd = '/proc/self/fd/' . fileno($fh);
    my $at = readlink($fd);
    return "$source is reached through a symlink (it resolves to $at)"
      unless defined $at && $at eq $source;
    $src{$source} = [$fh, $fd];
  }
  for (my $i = 0; $i < @view; $i += 3) {
    my ($step, $source, $target) = @view[$i .. $i + 2];
    if ($step eq 'bind-ro-if') {
      next unless defined $src{$source};
      # Its mount point, made where the fork is now (docs/containment.md).
      if (-d $src{$source}[0]) {
        my $why = mkdirs($target);
        return $why if defined $why;
      } elsif (!-e $target) {
        open(my $f, '>', $target) or return "cannot make $target: $!";
        close($f);
      }
      my $top = substr($target, 0, rindex($target, '/'));
      my $repo = $repo_of{$source};
      # One inside the project would be the fork's now, not the user's.
      if ($repo && index("$repo->[2]/", "$top/") != 0) {
        my ($fd, $at) = @$repo[1, 2];
        syscall($SYS_mount, $fd, $at, 0, $MS_BIND, 0) == 0 or return "cannot bind $at: $!";
        my $why = remount_ro($at);
        return $why if defined $why;
      }
      $step = 'bind-ro';
    }
    if ($step eq 'bind' || $step eq 'bind-ro') {
      # Not MS_REC: nothing mounted below a source is carried in.
      my $from = $src{$source}[1];
      syscall($SYS_mount, $from, $target, 0, $MS_BIND, 0) == 0
        or return "cannot bind $source at $target: $!";
      if ($step eq 'bind-ro') {
        my $why = remount_ro($target);
        return $why if defined $why;
      }
    } elsif ($step eq 'mkdir') {
      my $why = mkdirs($target);
      return $why if defined $why;
    } elsif ($step eq 'tmpfs') {
      my ($type, $opts) = ('tmpfs', 'mode=755,size=64k');
      syscall($SYS_mount, $type, $target, $type, $MS_NOSUID | $MS_NODEV | $MS_NOEXEC, $opts) == 0
        or return "cannot mount a tmpfs at $target: $!";
    } elsif ($step eq 'file') {
      return "$target exists" if -e $target || -l $target;
      open(my $f, '>', $target) or return "cannot write $target: $!";
      print $f $source;
      close($f) or return "cannot write $target: $!";
    } else {    # remount-ro
      my $why = remount_ro($target);
      return $why if defined $why;
    }
  }
  close($_->[0]) for grep { defined } values %src, values %repo_of;
  # The bounding set limits what exec gives a root process; the inheritable
  # and ambient sets must not hand CAP_SYS_ADMIN back either.
  syscall($SYS_prctl, $PR_CAP_AMBIENT, $PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == 0
    or return "cannot clear the ambient capabilities: $!";
  my $hdr = pack('LL', 0x20080522, 0);    # _LINUX_CAPABILITY_VERSION_3, this process
  my $data = "\0" x 24;
  syscall($SYS_capget, $hdr, $data) == 0 or return "cannot read the capabilities: $!";
  my @caps = unpack('L6', $data);
  @caps[2, 5] = (0, 0);    # inheritable, both words
  syscall($SYS_capset, $hdr, pack('L6', @caps)) == 0
    or return "cannot clear the inheritable capabilities: $!";
  syscall($SYS_prctl, $PR_CAPBSET_DROP, $CAP_SYS_ADMIN, 0, 0, 0) == 0
    or return "cannot drop CAP_SYS_ADMIN: $!";
  return undef;
}

# The repository a worktree's gitfile names: its `gitdir:`, or the common
# dir that one names. Returns (path) or (undef, why).
sub git_common_dir {
  my ($gitfile) = @_;
  my $line = read_line($gitfile);
  return (undef, "$gitfile is not a gitfile") unless defined $line && $line =~ /^gitdir: (.+)$/;
  my $dir = $1;
  $dir = substr($gitfile, 0, rindex($gitfile, '/')) . "/$dir" unless $dir =~ m{^/};
  my $common = read_line("$dir/commondir");
  $dir = $common =~ m{^/} ? $common : "$dir/$common" if defined $common && $common ne '';
  return ($dir);
}

# The first line of a file without its line end, or undef.
sub read_line {
  my ($path) = @_;
  open(my $f, '<', $path) or return undef;
  my $line = <$f>;
  close($f);
  $line =~ s/\r?\n\z// if defined $line;
  return $line;
}

# Makes the mount at $target read-only, keeping the flags it has: where the
# namespace belongs to a user namespace, those of a mount copied from the
# host are locked, and a remount that dropped one would be refused.
sub remount_ro {
  my ($target) = @_;
  my $buf = "\0" x 256;
  syscall($SYS_statfs, $target, $buf) == 0 or return "cannot stat $target: $!";
  my $f = unpack('Q', substr($buf, 80, 8));    # f_flags (ST_*), the same on x86_64 and aarch64
  my $keep = $f & ($MS_NOSUID | $MS_NODEV | $MS_NOEXEC | $MS_NOATIME | $MS_NODIRATIME);
  $keep |= $MS_RELATIME if $f & 4096;          # ST_RELATIME
  syscall($SYS_mount, 0, $target, 0, $MS_REMOUNT | $MS_BIND | $MS_RDONLY | $keep, 0) == 0
    or return "cannot make $target read-only: $!";
  return undef;
}

# mkdir -p that refuses a symlink on the way.
sub mkdirs {
  my ($target) = @_;
  my $path = '';
  for my $part (grep { $_ ne '' } split m{/}, $target) {
    $path .= "/$part";
    return "$path is a symlink" if -l $path;
    next if -d _;
    return "$path is not a directory" if -e _;
    mkdir($path, 0755) or return "cannot make $path: $!";
  }
  return undef;
}

sub supervise {
  my ($bash) = @_;
  my ($worker_gone, $kill_at, $killing) = (0, 0, 0);
  # After bash exited: when to look for what it left running, and what was said last.
  my ($scan_at, $lingered) = (0, '');
  for (;;) {
    my $children = 1;
    for (;;) {
      my $p = waitpid(-1, $WNOHANG);
      if ($p > 0) {
        if ($p == $bash) {
          my $s = $?;
          report('exited', ($s & 127) ? ('signal', $s & 127) : ('code', $s >> 8));
          $scan_at = uptime() + 1;
        }
        next;
      }
      $children = 0 if $p < 0 && ($! + 0) != $EINTR;
      last if $p == 0 || ($! + 0) != $EINTR;
    }
    if ($scan_at && !$killing && uptime() >= $scan_at) {
      $scan_at = uptime() + 1;
      $lingered = report_lingering($lingered);
    }
    if ($want_int) {
      $want_int = 0;
      interrupt_all();
    }
    if ($want_kill || ($kill_at && time() >= $kill_at)) {
      $want_kill = 0;
      $killing = 1;
    }
    if ($killing) {
      if ($cg ne '' && open(my $k, '>', "$cg/cgroup.kill")) {
        syswrite($k, "1\n");
        close($k);
      }
      my @pids = descendants();
      kill('KILL', @pids) if @pids;
    }
    my $populated = $events ? populated() : 0;
    if (!$children && !$populated) {
      last unless @relays;
      # Nobody is left to read stdin; the output pipes end once drained. A
      # cancel stops waiting on a reader that does not read.
      relay_close($relays[0]);
      if ($killing) { relay_close($_) for @relays }
      last unless grep { defined $_->[0] || defined $_->[1] } @relays;
    }

    my ($rin, $win, $ein) = ('', '', '');
    vec($rin, 0, 1) = 1 unless $worker_gone;
    vec($ein, fileno($events), 1) = 1 if $events;
    relay_wants(\@relays, \$rin, \$win) if @relays;
    # The timeout bounds the race of a SIGCHLD just before select.
    my $n = select($rin, $win, $ein, 0.05);
    relay_move(\@relays, $n > 0 ? $rin : '') if @relays;
    if ($n > 0 && !$worker_gone && vec($rin, 0, 1)) {
      my $got = sysread(STDIN, my $cmds, 64);
      if ($got) {
        $want_int = 1 if index($cmds, 'i') >= 0;
        $want_kill = 1 if index($cmds, 'k') >= 0;
      } elsif (defined $got || ($! + 0) != $EINTR) {
        $worker_gone = 1;
        $want_int = 1;
        $kill_at = time() + 10;
      }
    }
  }
  my $removed = 1;
  $removed = rmdir_cgroup($cg) ? 1 : 0 if $cg ne '';
  report('settled', $removed, @relays ? ($relays[1][4], $relays[2][4]) : ());
  exit 0;
}

# Seconds since boot, to 10 ms: the clock of /proc/uptime (Time::HiRes is
# not in perl-base).
sub uptime {
  my $t = 0;
  if (open(my $u, '<', '/proc/uptime')) {
    my $line = <$u>;
    close($u);
    $t = $1 if defined $line && $line =~ /^(\d+(?:\.\d+)?) /;
  }
  return $t;
}

# Says which processes keep the attempt alive after bash exited (a setsid
# daemon, a background job), when that set changed since `$said`; returns
# what it said. Only this process can read /proc for the worker and daemon.
sub report_lingering {
  my ($said) = @_;
  my @pids = sort { $a <=> $b } members();
  my $key = join(',', @pids);
  return $said if $key eq $said || !@pids;
  my @words = ('lingering', scalar(@pids));
  for my $p (@pids[0 .. ($#pids < 15 ? $#pids : 15)]) {
    push @words, $p, unpack('H*', command_of($p));
  }
  report(@words);
  return $key;
}

# A process's command line (arguments joined by spaces, cut to 100 bytes),
# or [comm] for one without (a kernel thread, an exiting process).
sub command_of {
  my ($p) = @_;
  my $cmd = '';
  if (open(my $f, '<', "/proc/$p/cmdline")) {
    sysread($f, $cmd, 100);
    close($f);
  }
  $cmd =~ s/\0+$//;
  $cmd =~ tr/\0/ /;
  return $cmd if $cmd ne '';
  if (open(my $s, '<', "/proc/$p/stat")) {
    my $line = <$s>;
    close($s);
    return "[$1]" if defined $line && $line =~ /^\d+ \((.*)\) \S /s;
  }
  return '?';
}

sub event {
  my ($key) = @_;
  sysseek($events, 0, 0);
  my $buf = '';
  sysread($events, $buf, 4096);
  return $buf =~ /^$key 1$/m ? 1 : 0;
}

sub populated { return event('populated') }

sub write_file {
  my ($path, $text) = @_;
  open(my $f, '>', $path) or return 0;
  my $ok = syswrite($f, $text);
  return close($f) && $ok;
}

# SIGINT to every process, once. A scan of processes races with a fork in
# progress (the new child would miss the signal and wait for SIGKILL), so a
# cgroup is frozen for the scan: its processes get SIGINT as they thaw,
# children forked meanwhile included. Without a cgroup the race stays.
sub interrupt_all {
  my $frozen = $cg ne '' && write_file("$cg/cgroup.freeze", "1\n");
  if ($frozen) {
    for (my $i = 0; $i < 200 && !event('frozen'); $i++) {
      select(undef, undef, undef, 0.005);
    }
  }
  my @pids = members();
  kill('INT', @pids) if @pids;
  write_file("$cg/cgroup.freeze", "0\n") if $frozen;
}

# Every live process of the attempt: the supervisor's descendants (a child
# subreaper keeps orphans), plus every member of the cgroup and its children.
sub members {
  my %seen = map { $_ => 1 } descendants();
  if ($cg ne '') {
    $seen{$_} = 1 for cgroup_procs($cg);
  }
  delete $seen{$$};
  return keys %seen;
}

sub descendants {
  my (%kids, %state);
  opendir(my $d, '/proc') or return ();
  for my $e (readdir($d)) {
    next unless $e =~ /^\d+$/;
    open(my $s, '<', "/proc/$e/stat") or next;
    my $line = <$s>;
    close($s);
    next unless defined $line && $line =~ /.*\) (\S) (\d+) /s;    # comm may hold ") "
    $state{$e} = $1;
    push @{ $kids{$2} }, $e;
  }
  closedir($d);
  my @out;
  my @todo = @{ $kids{$$} || [] };
  while (@todo) {
    my $p = shift @todo;
    push @out, $p unless $state{$p} eq 'Z';
    push @todo, @{ $kids{$p} || [] };
  }
  return @out;
}

sub cgroup_procs {
  my ($dir) = @_;
  my @pids;
  if (open(my $f, '<', "$dir/cgroup.procs")) {
    while (my $l = <$f>) { push @pids, $1 if $l =~ /^(\d+)/ }
    close($f);
  }
  opendir(my $d, $dir) or return @pids;
  my @subs = grep { !/^\./ && -d "$dir/$_" } readdir($d);
  closedir($d);
  push @pids, cgroup_procs("$dir/$_") for @subs;
  return @pids;
}

# Removes the attempt's cgroup and any the branch made inside it.
sub rmdir_cgroup {
  my ($dir) = @_;
  if (opendir(my $d, $dir)) {
    my @subs = grep { !/^\./ && -d "$dir/$_" } readdir($d);
    closedir($d);
    rmdir_cgroup("$dir/$_") for @subs;
  }
  return rmdir($dir) || !-e $dir;
}

# The cgroup2 mount plus this process's own cgroup (a delegated subtree
# when not root), then `marsh`.
sub cgroup_base {
  open(my $mi, '<', '/proc/self/mountinfo') or return (undef, "cannot read mountinfo: $!");
  my ($root, $mnt);
  while (my $l = <$mi>) {
    my ($pre, $post) = split / - /, $l, 2;
    next unless defined $post && $post =~ /^cgroup2 /;
    my @p = split / /, $pre;
    ($root, $mnt) = ($p[3], $p[4]);
    last;
  }
  close($mi);
  return (undef, 'no cgroup2 mount') unless defined $mnt;
  s/\\([0-7]{3})/chr(oct($1))/ge for $root, $mnt;
  open(my $c, '<', '/proc/self/cgroup') or return (undef, "cannot read /proc/self/cgroup: $!");
  my $own;
  while (my $l = <$c>) { $own = $1 if $l =~ /^0::(\/.*?)\s*$/ }
  close($c);
  return (undef, 'no cgroup2 membership') unless defined $own;
  $own = substr($own, length($root)) if $root ne '/' && index($own, $root) == 0;
  $own = '' if $own eq '/';
  return (undef, "unusable cgroup path $mnt$own") if "$mnt$own" =~ /\n| \(deleted\)$/;
  return ("$mnt$own/marsh");
}

sub mkdir_p {
  my ($dir) = @_;
  return 1 if -d $dir;
  return mkdir($dir) || ($! + 0) == $EEXIST;
}
