#include "localsock.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int mrd_clear_stale_socket(const char *path, int type)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int rv = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	close(fd);
	if (rv == 0)
		return -EADDRINUSE;
	/* Only a refused connection means nobody listens: EPROTOTYPE is a
	 * live socket of another type, not ours to remove. */
	if (e != ECONNREFUSED)
		return -e;
	return unlink(path) < 0 ? -errno : 0;
}

const char *mrd_clear_stale_str(int err)
{
	return err == -EADDRINUSE ? "another metarocd is listening on it"
	       : err == -EEXIST   ? "exists and is not a socket"
				  : strerror(-err);
}

int mrd_group_gid(const char *name, gid_t *gid)
{
	char buf[4096];
	struct group gr, *res = NULL;
	if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || !res)
		return 0;
	*gid = gr.gr_gid;
	return 1;
}

int mrd_uid_in_group(uid_t uid, gid_t gid)
{
	char buf[4096];
	struct passwd pw, *res = NULL;
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return 0;
	if (pw.pw_gid == gid)
		return 1;
	gid_t groups[256];
	int n = 256;
	if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
		return 0;
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return 1;
	return 0;
}
