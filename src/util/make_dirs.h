/* mkdir -p, for the directories a run writes into (checkpoint_dir, tensorboard_dir). */
#ifndef FT_UTIL_MAKE_DIRS_H
#define FT_UTIL_MAKE_DIRS_H

/* Creates dir and every missing parent (mode 0777 less the umask); a directory that
 * exists already is fine. 0, or -1 with errno set (ENAMETOOLONG: dir does not fit
 * PATH_MAX). */
int ft_make_dirs(const char *dir);

#endif
